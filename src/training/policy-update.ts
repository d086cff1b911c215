import type { Tensor } from '../core/tensor.js';
import { tidy, dispose } from '../core/scope.js';
import type { Rng } from '../core/rng.js';
import { valueAndGrad } from '../core/transforms.js';
import { tensor } from '../ops/creation.js';
import { adamwStep, type OptimizerState } from '../nn/optim.js';
import { activationDType, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import type { PyTree } from '../core/pytree.js';
import { trainableOf, withTrainable } from '../nn/lora.js';
import type { BoundObjective } from '../objectives/registry.js';
import type { RolloutBatch } from '../objectives/batch.js';
import type { Metrics } from '../objectives/types.js';
import { selectRows, selectRowValues, type SequenceBatch } from '../rl/batch.js';
import type { Rollouts } from '../rl/sampler.js';
import { scoreLogProbs } from '../rl/score.js';

/**
 * The optimisation half of one RL step: `numIterations` epochs over the step's rollouts, each split into
 * minibatches of whole groups (group-wise objectives such as ConSPO and DisCO need every member of a group
 * together). pi_old is what the sampler recorded; the current policy's log-probs come from `scoreLogProbs`
 * (or from a context-conditioned batch when BICC is on), at the sampling temperature.
 */
export interface UpdateInputs {
  readonly rollouts: Rollouts;
  readonly rewards: readonly number[];
  /** Precomputed advantages (RCC), or null for the objective's own. */
  readonly advantages: readonly number[] | null;
  readonly objective: BoundObjective;
  readonly progress: { readonly step: number; readonly totalSteps: number };
  readonly numIterations: number;
  readonly groupsPerMinibatch: number;
  readonly maxCompletionLength: number;
  /** Given the rows of a minibatch (in the plain layout), the batch whose completions the policy scores. */
  readonly scoredBatch?: (rows: readonly number[]) => SequenceBatch;
}

export interface OptimState {
  readonly params: TransformerParams;
  /** AdamW's state over `trainableOf(params)`. */
  readonly opt: OptimizerState<PyTree>;
}

export interface AdamWSettings {
  readonly lr: number;
  readonly maxGradNorm: number;
  readonly weightDecay: number;
}

export interface UpdateResult extends OptimState {
  /** Metric tensors of the last minibatch, plus loss and grad norm (caller reads and disposes them). */
  readonly metrics: Metrics;
  readonly tokensScored: number;
}

export function shuffled(n: number, rng: Rng): number[] {
  const order = [...Array(n).keys()];
  for (let i = n - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

export function updatePolicy(
  state: OptimState,
  config: TransformerConfig,
  inputs: UpdateInputs,
  lrFor: (step: number) => AdamWSettings,
  rng: Rng,
  training: { readonly dropoutRng?: Rng | undefined; readonly remat?: boolean } = {},
): UpdateResult {
  const { rollouts: ro, objective } = inputs;
  const g = ro.groupSize;
  const groups = ro.prompts.length;
  const c = ro.completionLen;
  let { params, opt } = state;
  let metrics: Metrics = {};
  let tokensScored = 0;
  for (let epoch = 0; epoch < inputs.numIterations; epoch++) {
    const order = shuffled(groups, rng);
    for (let start = 0; start < groups; start += inputs.groupsPerMinibatch) {
      const rows = order
        .slice(start, start + inputs.groupsPerMinibatch)
        .flatMap((grp) => Array.from({ length: g }, (_, k) => grp * g + k));
      const plain = selectRows(ro, rows);
      const scored = inputs.scoredBatch ? inputs.scoredBatch(rows) : plain;
      tokensScored += scored.batchSize * (scored.promptLen + scored.completionLen);
      const settings = lrFor(opt.step);
      dispose(metrics);
      const next = tidy(() => {
        const backend = params.embed.weight.backend;
        const dtype = activationDType(params);
        const shape = [rows.length, c];
        const on = { dtype, backend };
        const batch: Omit<RolloutBatch, 'logProbs'> = {
          oldLogProbs: tensor(selectRowValues(ro.oldLogProbs, c, rows), shape, on),
          ...(ro.refLogProbs ? { refLogProbs: tensor(selectRowValues(ro.refLogProbs, c, rows), shape, on) } : {}),
          mask: tensor(plain.completionMask, shape, on),
          rewards: rows.map((r) => inputs.rewards[r]!),
          groupIds: rows.map((r) => ro.promptIndex[r]!),
          ...(inputs.advantages ? { advantages: rows.map((r) => inputs.advantages![r]!) } : {}),
          lengths: rows.map((r) => ro.completionLengths[r]!),
          maxCompletionLength: inputs.maxCompletionLength,
        };
        // Only the trainable part is differentiated (under LoRA the adapters: no gradient for the frozen base).
        const current = params;
        const lossFn = (t: PyTree): [Tensor, Metrics] => {
          const scoring = { temperature: ro.scoringTemperature, ...training };
          const logProbs = scoreLogProbs(withTrainable(current, t), config, scored, scoring);
          const result = objective.loss({ ...batch, logProbs }, inputs.progress);
          return [result.loss, result.metrics];
        };
        const trainable = trainableOf(params);
        const [[loss, m], grads] = valueAndGrad(lossFn, { hasAux: true })(trainable);
        const stepped = adamwStep(trainable, grads, opt, {
          lr: settings.lr,
          maxGradNorm: settings.maxGradNorm,
          weightDecay: settings.weightDecay,
        });
        return {
          params: withTrainable(params, stepped.params),
          opt: stepped.state,
          metrics: { ...m, loss, grad_norm: stepped.gradNorm } as Metrics,
        };
      });
      if (params !== state.params) dispose([trainableOf(params), opt]);
      ({ params, opt, metrics } = next);
    }
  }
  return { params, opt, metrics, tokensScored };
}
