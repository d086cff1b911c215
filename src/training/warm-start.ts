/** The supervised warm-start: one step on worked solutions, and `warmStartUntil`'s validation check. */
import type { RecordedStep } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { dispose, tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { adamwScheduleValues, type AdamWConfig, type AdamWStepOptions, type OptimizerState } from '../nn/optim.js';
import { activationDType, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import type { SequenceBatch } from '../rl/batch.js';
import { batchTensors, type BatchTensors } from '../rl/score.js';
import { valueAndGrad } from '../core/transforms.js';
import { adamwStep } from '../nn/optim.js';
import { lrAt } from '../nn/schedule.js';
import type { PyTree } from '../core/pytree.js';
import { trainableOf, withTrainable } from '../nn/lora.js';
import { sampleRollouts } from '../rl/sampler.js';
import { sftLoss } from '../rl/sft.js';
import { contextWarmStartBatch } from '../rl/bicc-warm-start.js';
import { sampleProblems } from '../tasks/task.js';
import { readMetrics, type MetricRecord } from './metrics.js';
import { emit, adoptOrSkip, donatesUpdates, updatedStateCheck, type Run, type TrainHooks } from './run.js';
import { STATE_METRIC } from './divergence.js';

/**
 * With `warmStartUntil`: warm-start steps between validation checks, and the validation set's size. A policy's
 * pass@1 jumps within a few tens of steps, so checks 10 steps apart on 100 seed-dependent problems let the start
 * overshoot by tens of points (held-out 0.27-0.63 over 10 seeds); every 2 steps on 200 problems, the same for every
 * seed: 0.27-0.455 (docs/results/addition-regime/README.md).
 */
export const WARM_START_CHECK_EVERY = 2;
export const WARM_START_VALIDATION = 200;
/** The validation problems' generator seed: one set for every run, so the target means the same for each seed. */
const WARM_START_VALIDATION_SEED = 7919;

/**
 * `warmStartUntil`: at every WARM_START_CHECK_EVERY-th step, greedy pass@1 on WARM_START_VALIDATION training-split
 * problems (the same for every run, drawn with their own generator so the training stream is not shifted); true once
 * it reaches the target. Recorded as an eval record labelled `warmstart-validation`.
 */
export async function warmStartReached(run: Run, hooks: TrainHooks): Promise<boolean> {
  const { cfg } = run;
  const step = run.at.step;
  if (cfg.warmStartUntil === null || step === 0 || step % WARM_START_CHECK_EVERY !== 0) return false;
  const problems = sampleProblems(run.task, WARM_START_VALIDATION, new Rng(WARM_START_VALIDATION_SEED));
  // Greedy decoding only (it draws nothing from its generator).
  const prompts = problems.map((p) => p.prompt);
  const greedy = await sampleRollouts(run.params, run.config, run.tokenizer, prompts, new Rng(0), {
    maxNewTokens: cfg.maxCompletionLength,
    temperature: 0,
  });
  const passAt1 = greedy.completions.filter((c, i) => run.task.verify(c, problems[i]!) > 0).length / problems.length;
  emit(run, { phase: 'eval', step, label: 'warmstart-validation', at: 'warmstart', pass_at_1: passAt1 }, hooks);
  return passAt1 >= cfg.warmStartUntil;
}

export async function warmStartStep(run: Run, hooks: TrainHooks): Promise<void> {
  const { cfg } = run;
  const t0 = performance.now();
  const problems = sampleProblems(run.task, cfg.warmStartBatchSize, run.rng);
  // With warmStartContextShare, some examples carry BICC's context before the query; at 0 this is the
  // plain batch of worked solutions and draws nothing more from the run's generator.
  const batch = contextWarmStartBatch(run.task, problems, run.tokenizer, run.config, run.rng, {
    share: cfg.warmStartContextShare,
    groupSize: cfg.numGenerations,
    bicc: { contextShare: cfg.biccContextShare, placement: cfg.biccPlacement },
  });
  const lr = lrAt(
    {
      peakLr: cfg.warmStartLearningRate,
      warmupSteps: Math.min(20, cfg.warmStartSteps),
      totalSteps: cfg.warmStartSteps,
      minLr: cfg.warmStartLearningRate / 10,
    },
    run.opt.step,
  );
  const dropoutRng = run.params.lora?.dropout ? run.rng : undefined;
  const remat = cfg.gradientCheckpointing;
  const hyper = { lr, maxGradNorm: cfg.maxGradNorm, weightDecay: cfg.weightDecay };
  const next =
    recordedStep(run, batch, hyper, dropoutRng) ??
    tidy(() =>
      supervisedUpdate(run.params, run.config, trainableOf(run.params), run.opt, batch, hyper, {
        dropoutRng,
        remat,
        donate: donatesUpdates(cfg),
      }),
    );
  const read = await readMetrics({ loss: next.loss, grad_norm: next.gradNorm, [STATE_METRIC]: next.stateCheck });
  const [loss, grad_norm] = [read.loss!, read.grad_norm!];
  const skipped = await adoptOrSkip(run, 'warmstart', read, next);
  run.at.step++;
  const seconds = (performance.now() - t0) / 1000;
  const record: MetricRecord = {
    phase: 'warmstart',
    step: run.at.step,
    loss,
    grad_norm,
    lr,
    ...(skipped ? { skipped } : {}),
    seconds,
    tokens_per_s: (batch.batchSize * (batch.promptLen + batch.completionLen)) / seconds,
  };
  emit(run, record, hooks);
  hooks.onProgress?.({ phase: 'warmstart', step: run.at.step, total: cfg.warmStartSteps, record });
}

/** A warm-start update: the new policy and optimizer state, and what the step reads back. */
type Update = {
  params: TransformerParams;
  opt: OptimizerState<PyTree>;
  loss: Tensor;
  gradNorm: Tensor;
  stateCheck: Tensor;
};

/**
 * One supervised update of `trainable`, the part of `params` the run trains (under LoRA the adapters: no gradient
 * for the frozen base): the loss, its gradients, AdamW, and the check of the updated state (`updatedStateCheck`).
 */
function supervisedUpdate(
  params: TransformerParams,
  config: TransformerConfig,
  trainable: PyTree,
  opt: OptimizerState<PyTree>,
  batch: SequenceBatch | BatchTensors,
  hyper: AdamWConfig,
  opts: AdamWStepOptions & { readonly dropoutRng?: Rng | undefined; readonly remat: boolean },
): Update {
  const { dropoutRng, remat, ...update } = opts;
  const lossOf = (t: PyTree) => sftLoss(withTrainable(params, t), config, batch, { dropoutRng, remat });
  const [loss, grads] = valueAndGrad(lossOf)(trainable);
  const stepped = adamwStep(trainable, grads, opt, hyper, update);
  const updated = { params: withTrainable(params, stepped.params), opt: stepped.state };
  return { ...updated, loss, gradNorm: stepped.gradNorm, stateCheck: updatedStateCheck(updated) };
}

/** At most this many batch shapes recorded (one recording each); a batch of another shape runs op by op. */
const MAX_RECORDINGS = 8;

/** What a recorded warm-start step takes: the trained part, its moments, AdamW's values and the batch. */
type StepInputs = { trainable: PyTree; m: PyTree; v: PyTree; schedule: Tensor; batch: BatchTensors };
type StepOutputs = { trainable: PyTree; m: PyTree; v: PyTree; loss: Tensor; gradNorm: Tensor; stateCheck: Tensor };

/**
 * The warm-start step through the backend's recording (`Backend.record`: WebGPU's `recordStep`), one per batch
 * shape, made at the shape's second step and kept in `run.recorded` until the warm-start ends: the same kernels as
 * the op-by-op step on the same values (the same results bit for bit), with no op layer between them. Where it
 * cannot be (a backend that records nothing, LoRA dropout, whose masks are drawn on the host, or a run that keeps
 * the old state to skip a bad update, which a step that updates in place cannot), at a shape's first step, or past
 * MAX_RECORDINGS shapes: null, and the step runs op by op.
 */
function recordedStep(run: Run, batch: SequenceBatch, hyper: AdamWConfig, dropoutRng: Rng | undefined): Update | null {
  const backend = run.params.embed.weight.backend;
  if (!backend.record || dropoutRng || !donatesUpdates(run.cfg)) return null;
  run.recorded ??= new Map();
  const shape = `${batch.batchSize}x${batch.promptLen}x${batch.completionLen}`;
  const seen = run.recorded.get(shape);
  // A shape's first step runs op by op: the kernels it meets are tuned at its end (tuner.ts), and the recording,
  // made at its second step, keeps the tuned configurations.
  if (seen === undefined) {
    if (run.recorded.size < MAX_RECORDINGS) run.recorded.set(shape, 'warming');
    return null;
  }
  let recorded = seen === 'warming' ? undefined : (seen as RecordedStep<StepInputs, StepOutputs>);
  // The frozen part (a LoRA base) is read as it is at each run: the step closes over it.
  const params = run.params;
  const remat = run.cfg.gradientCheckpointing;
  const step = (s: StepInputs): StepOutputs => {
    // The host's count is a placeholder: AdamW reads this step's values from `schedule`.
    const opt = { step: 0, m: s.m, v: s.v };
    const u = supervisedUpdate(params, run.config, s.trainable, opt, s.batch, hyper, {
      remat,
      schedule: s.schedule,
      donate: true,
    });
    const { loss, gradNorm, stateCheck } = u;
    return { trainable: trainableOf(u.params), m: u.opt.m, v: u.opt.v, loss, gradNorm, stateCheck };
  };
  const given: StepInputs = {
    trainable: trainableOf(run.params),
    m: run.opt.m,
    v: run.opt.v,
    schedule: tensor(adamwScheduleValues(run.opt.step, hyper), [4], { backend }),
    batch: batchTensors(batch, backend, activationDType(run.params)),
  };
  try {
    if (!recorded) {
      recorded = backend.record(step, given);
      run.recorded.set(shape, recorded);
    }
    const out = recorded.run(given);
    return {
      params: withTrainable(run.params, out.trainable),
      opt: { step: run.opt.step + 1, m: out.m, v: out.v },
      loss: out.loss,
      gradNorm: out.gradNorm,
      stateCheck: out.stateCheck,
    };
  } finally {
    dispose([given.schedule, given.batch]);
  }
}

/** Let go of the warm-start's recorded steps (at its end: the RL phase runs op by op). */
export function disposeRecordedSteps(run: Run): void {
  for (const r of run.recorded?.values() ?? []) if (r !== 'warming') r.dispose();
  run.recorded = undefined;
}
