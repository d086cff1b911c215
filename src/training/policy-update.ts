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
import { scoreLogProbs } from '../rl/score.js';

/**
 * One RL step's rollouts as the update reads them: every array over the same B rows, G consecutive rows per
 * group, [B, C] arrays row-major. What the sampler, the scoring stage and the interventions gave, in one piece.
 */
export interface PolicyBatch {
  /** The sequences the policy is scored on: the rollouts, or BICC's conditioned rows (the same completion block). */
  readonly sequences: SequenceBatch;
  /** log pi_old [B, C]: what the ratio divides by. */
  readonly oldLogProbs: Float32Array;
  /** log pi_ref [B, C], or null for a run without a reference. */
  readonly refLogProbs: Float32Array | null;
  /** What the objective learns from, one per row. */
  readonly rewards: readonly number[];
  /** Precomputed advantages (RCC), or null for the objective's own. */
  readonly advantages: readonly number[] | null;
  /** Each row's group (its prompt's index). */
  readonly groupIds: readonly number[];
  /** Rows per group, G: a minibatch takes whole groups. */
  readonly groupSize: number;
  /** Completion tokens of each row, EOS included. */
  readonly completionLengths: readonly number[];
  /** The temperature the completions were sampled at: the policy is scored at it, as pi_old was. */
  readonly temperature: number;
}

/** How the update goes over a `PolicyBatch`. */
export interface UpdatePlan {
  readonly objective: BoundObjective;
  readonly progress: { readonly step: number; readonly totalSteps: number };
  readonly numIterations: number;
  readonly groupsPerMinibatch: number;
  readonly maxCompletionLength: number;
  /**
   * Each AdamW step takes the parameters and moments before it over (`adamwStep`'s `donate`): no second copy of
   * them, but the state before the update is gone, so only a run that stops on a non-finite update may.
   */
  readonly donate?: boolean;
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

/**
 * The optimisation half of one RL step: `plan.numIterations` epochs over the batch, each split into minibatches
 * of whole groups (group-wise objectives such as ConSPO and DisCO need every member of a group together). The
 * current policy's log-probs come from `scoreLogProbs` on the batch's sequences, at the sampling temperature.
 */
export function updatePolicy(
  state: OptimState,
  config: TransformerConfig,
  batch: PolicyBatch,
  plan: UpdatePlan,
  lrFor: (step: number) => AdamWSettings,
  rng: Rng,
  training: { readonly dropoutRng?: Rng | undefined; readonly remat?: boolean } = {},
): UpdateResult {
  const { sequences } = batch;
  const { objective } = plan;
  const g = batch.groupSize;
  const groups = sequences.batchSize / g;
  const c = sequences.completionLen;
  let { params, opt } = state;
  let metrics: Metrics = {};
  let tokensScored = 0;
  for (let epoch = 0; epoch < plan.numIterations; epoch++) {
    const order = shuffled(groups, rng);
    for (let start = 0; start < groups; start += plan.groupsPerMinibatch) {
      const rows = order
        .slice(start, start + plan.groupsPerMinibatch)
        .flatMap((grp) => Array.from({ length: g }, (_, k) => grp * g + k));
      const scored = selectRows(sequences, rows);
      tokensScored += scored.batchSize * (scored.promptLen + scored.completionLen);
      const settings = lrFor(opt.step);
      dispose(metrics);
      const next = tidy(() => {
        const backend = params.embed.weight.backend;
        const dtype = activationDType(params);
        const shape = [rows.length, c];
        const on = { dtype, backend };
        const { refLogProbs, advantages } = batch;
        const minibatch: Omit<RolloutBatch, 'logProbs'> = {
          oldLogProbs: tensor(selectRowValues(batch.oldLogProbs, c, rows), shape, on),
          ...(refLogProbs ? { refLogProbs: tensor(selectRowValues(refLogProbs, c, rows), shape, on) } : {}),
          // BICC's conditioned rows keep the plain rows' completion mask, so the scored rows' mask is the mask.
          mask: tensor(scored.completionMask, shape, on),
          rewards: rows.map((r) => batch.rewards[r]!),
          groupIds: rows.map((r) => batch.groupIds[r]!),
          ...(advantages ? { advantages: rows.map((r) => advantages[r]!) } : {}),
          lengths: rows.map((r) => batch.completionLengths[r]!),
          maxCompletionLength: plan.maxCompletionLength,
        };
        // Only the trainable part is differentiated (under LoRA the adapters: no gradient for the frozen base).
        const current = params;
        const lossFn = (t: PyTree): [Tensor, Metrics] => {
          const scoring = { temperature: batch.temperature, ...training };
          const logProbs = scoreLogProbs(withTrainable(current, t), config, scored, scoring);
          const result = objective.loss({ ...minibatch, logProbs }, plan.progress);
          return [result.loss, result.metrics];
        };
        const trainable = trainableOf(params);
        const [[loss, m], grads] = valueAndGrad(lossFn, { hasAux: true })(trainable);
        const hyper = { lr: settings.lr, maxGradNorm: settings.maxGradNorm, weightDecay: settings.weightDecay };
        const stepped = adamwStep(trainable, grads, opt, hyper, { donate: plan.donate ?? false });
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
