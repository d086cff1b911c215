/**
 * The RLVR training loop: a supervised warm-start on worked solutions (`warm-start.ts`: so the policy starts with a
 * non-trivial pass rate, as RLVR assumes), then RL steps (`rl-step.ts`: sample G completions per prompt, verify,
 * RCC and BICC, `numIterations` epochs of AdamW), held-out evaluation (pass@1 greedy, avg@k and pass@k), metrics
 * as JSON lines and checkpoints that resume exactly (the run's state and shared operations: `run.ts`). `train`
 * opens the run, runs the two loops and ends it.
 */
import * as E from 'fp-ts/lib/Either.js';
import { dirname, join } from '../platform/files.js';
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { dispose } from '../core/scope.js';
import { adamwInit } from '../nn/optim.js';
import { trainableOf } from '../nn/lora.js';
import { initParams, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import { openBackend } from '../backends/registry.js';
import type { Problem, Task } from '../tasks/task.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import type { EvalResult } from './evaluate.js';
import type { MetricRecord } from './metrics.js';
import { yieldToEventLoop } from '../platform/host.js';
import { abortReason, InterruptedError } from './interrupted.js';
import { METRICS_FILE, type OutputLock, prepareOutputDir, resumesInPlace, truncateMetrics } from './output-dir.js';
import { checkResume, datasetIdentity } from './resume-check.js';
import { checkMetrics, checkOptimizerStep, parseTrainerState } from './trainer-state.js';
import type { MemoryLimits } from './memory.js';
import { checkRunFits } from './fits.js';
import {
  checkDatasetRows,
  checkTokenizerCarries,
  loadDatasetTask,
  loadPretrainedParams,
  readPretrained,
  type PretrainedParts,
} from './pretrained.js';
import { DEFAULT_KEEP_RECORDS, runEval, save, setup, type RlFaults, type Run, type TrainHooks, warn } from './run.js';
import { loadRunCheckpoint, phaseMismatch, phaseShapes, readPlan, trainsAt } from './trains.js';
import { disposeRecordedSteps, warmStartReached, warmStartStep } from './warm-start.js';
import { rlStep } from './rl-step.js';

export type { RlFaults, RolloutView, TrainHooks, TrainWarning } from './run.js';
export { DEFAULT_KEEP_RECORDS, taskFor } from './run.js';
export { heldOutLine } from './evaluate.js';
export { WARM_START_CHECK_EVERY, WARM_START_VALIDATION } from './warm-start.js';
export { NO_SIGNAL_WARN_STEPS, BICC_CONTEXT_WARN_NATS } from './rl-step.js';

export interface TrainResult {
  /** Where `params` live: `opts.backend`, or the one `train` opened from `cfg.backend` (the caller disposes it). */
  readonly backend: Backend;
  readonly config: TransformerConfig;
  readonly params: TransformerParams;
  readonly warmStart: EvalResult | null;
  readonly final: EvalResult;
  /** The latest metric records, at most `keepRecords` of them (all of them are in metrics.jsonl). */
  readonly records: readonly MetricRecord[];
}

export interface TrainOptions extends TrainHooks {
  /** Where parameters live: an open backend named `cfg.backend` (default: `train` opens `cfg.backend`). */
  readonly backend?: Backend;
  /** A task of the user's (its own prompts and reward function) instead of the built-in `cfg.task`. */
  readonly task?: Task<Problem>;
  /** What the device holds (default: the host's memory, or cfg.memoryLimitGb); a run estimated above is refused. */
  readonly memoryLimits?: MemoryLimits;
  /**
   * Stop when aborted (the CLI aborts on SIGINT/SIGTERM): at the next step boundary, with the checkpoint written
   * if steps were taken since the last one, by throwing an `InterruptedError`.
   */
  readonly signal?: AbortSignal;
  /** @internal Test only: see `RlFaults`. */
  readonly faults?: RlFaults;
}

/** Train from scratch (or resume from `cfg.resume`); returns held-out results after warm-start and after RL. */
export async function train(cfg: TrainConfig, opts: TrainOptions = {}): Promise<TrainResult> {
  // What the run holds until it ends, however it ends (the output directory's lock).
  const held: OutputLock[] = [];
  try {
    if (opts.backend) {
      if (opts.backend.name === cfg.backend) return await trainOn(cfg, opts, opts.backend, held);
      const why = `differs from the backend passed to train (${opts.backend.name})`;
      throw new TrainConfigError('backend', cfg.backend, why);
    }
    const backend = await openBackend(cfg.backend, cfg.threads === null ? {} : { threads: cfg.threads });
    try {
      return await trainOn(cfg, opts, backend, held);
    } catch (e) {
      // Nobody else holds the backend train opened: release it (a live GPU device keeps the process alive).
      backend.dispose();
      throw e;
    }
  } finally {
    for (const h of held) await h.release();
  }
}

async function trainOn(
  cfg: TrainConfig,
  opts: TrainOptions,
  backend: Backend,
  held: OutputLock[],
): Promise<TrainResult> {
  const { run, pretrained } = await openRun(cfg, opts, backend, held);
  const checkpointDir = cfg.outputDir ? join(cfg.outputDir, 'checkpoint') : null;
  let unsaved = false; // steps taken since the last checkpoint
  const maybeSave = async (): Promise<void> => {
    unsaved = true;
    if (checkpointDir && cfg.checkpointEvery > 0 && run.at.step % cfg.checkpointEvery === 0) {
      await save(run, checkpointDir);
      unsaved = false;
    }
  };
  // A step boundary is a safe point: the state is whole, so it can be saved and resumed exactly.
  const stopIfAsked = async (): Promise<void> => {
    // A step on the CPU backend awaits only settled promises: yield to the event loop so a signal can arrive.
    await yieldToEventLoop();
    if (!opts.signal?.aborted) return;
    if (checkpointDir && unsaved) await save(run, checkpointDir);
    throw new InterruptedError(abortReason(opts.signal), run.at.phase, run.at.step, checkpointDir);
  };

  try {
    while (run.at.phase === 'warmstart' && run.at.step < cfg.warmStartSteps) {
      // Checked before a step, so a run resumed at a check takes the same decision on the same parameters.
      if (await warmStartReached(run, opts)) break;
      await warmStartStep(run, opts);
      await maybeSave();
      await stopIfAsked();
    }
  } finally {
    // Its recorded steps (on a backend that records) hold a working set each: RL runs op by op.
    disposeRecordedSteps(run);
  }
  await beginRl(run, opts, backend);
  while (run.at.step < cfg.steps) {
    await rlStep(run, opts, opts.faults);
    if (cfg.evalEvery > 0 && run.at.step % cfg.evalEvery === 0 && run.at.step < cfg.steps)
      await runEval(run, opts, 'during-rl');
    await maybeSave();
    await stopIfAsked();
  }
  const finished = run.finalEval !== null && run.at.phase === 'rl' && run.at.step === cfg.steps;
  const final = finished ? run.finalEval! : await runEval(run, opts, 'after-rl');
  run.finalEval = final;
  if (checkpointDir && !finished) await save(run, checkpointDir);
  if (cfg.outputDir)
    await run.plan.rl.outputs(run, pretrained, cfg.outputDir, (w) =>
      warn(opts, { ...w, step: run.at.step, steps: 0, reward: Number.NaN }),
    );
  if (run.reference) dispose(run.reference);
  if (run.stale) dispose(run.stale);
  dispose(run.opt);
  const keep = Math.max(0, opts.keepRecords ?? DEFAULT_KEEP_RECORDS);
  const records = keep === 0 ? [] : run.records.slice(-keep);
  return { backend, config: run.config, params: run.params, warmStart: run.warmStartEval, final, records };
}

/**
 * A run ready for its first step: the config checked against the task, the model and the memory it will take, the
 * output directory locked, and the policy new, from a Hub model, or resumed from a checkpoint.
 */
async function openRun(
  cfg: TrainConfig,
  opts: TrainOptions,
  backend: Backend,
  held: OutputLock[],
): Promise<{ run: Run; pretrained: PretrainedParts | null }> {
  const pretrained = cfg.modelDir ? await readPretrained(cfg.modelDir) : null;
  const plan = await readPlan(cfg);
  const task = opts.task ?? (cfg.dataset ? await loadDatasetTask(cfg.dataset, opts.signal) : undefined);
  // The dataset's identity for resuming: a checkpoint resumes only on the same rows (ResumeMismatchError).
  const dataset = !opts.task && cfg.dataset ? await datasetIdentity(cfg.dataset) : null;
  const base = setup(cfg, task, pretrained, plan, dataset);
  if (E.isLeft(base)) throw base.left;
  if (pretrained) checkTokenizerCarries(base.right.tokenizer, base.right.config.vocabSize, base.right.task, cfg.seed);
  await checkDatasetRows(base.right.task, base.right.tokenizer, base.right.config.maxSeqLen, cfg, opts.signal);
  checkRunFits(base.right, pretrained, phaseShapes(plan), backend, opts);
  if (cfg.outputDir) {
    const inputs = [['--model', cfg.modelDir] as const, ['--dataset', cfg.dataset] as const];
    held.push(await prepareOutputDir(cfg.outputDir, { resume: cfg.resume, overwrite: cfg.overwrite, inputs }));
  }
  const keepDType = plan.warmStart.keepsStoredDType;
  const loadBase = async () =>
    await loadPretrainedParams(pretrained!, backend, { allowNonFinite: cfg.allowNonFiniteWeights, keepDType });
  const started = cfg.resume
    ? await resume(cfg.resume, backend, base.right, pretrained ? loadBase : null)
    : await startRun(base.right, backend, pretrained ? await loadBase() : null);
  return { run: { ...base.right, ...started }, pretrained };
}

/**
 * From the warm-start to RL: the warm-started policy's held-out evaluation, the policy RL trains (under LoRA on a
 * new model, adapters attached to the warm-started base), a fresh optimizer for it, and the frozen KL reference; a
 * run resumed in RL makes its reference again or loads it.
 */
async function beginRl(run: Run, hooks: TrainHooks, backend: Backend): Promise<void> {
  const rl = run.plan.rl;
  const resumedFrom = run.at.phase === 'rl' ? run.cfg.resume : null;
  if (run.at.phase === 'warmstart') {
    run.warmStartEval = await runEval(run, hooks, 'after-warmstart');
    trainAnew(run, await rl.attach(run.params, run, backend));
    run.at = { phase: 'rl', step: 0 };
  }
  run.reference = await rl.reference(run, backend, resumedFrom);
}

/** `params` as the policy, with a fresh optimizer over what it trains. */
function trainAnew(run: Pick<Run, 'params' | 'opt'>, params: TransformerParams): void {
  dispose(run.opt);
  run.params = params;
  run.opt = adamwInit(trainableOf(params));
}

/** The mutable part of a run at its start. */
type RunStart = Pick<
  Run,
  'rng' | 'params' | 'opt' | 'reference' | 'at' | 'warmStartEval' | 'finalEval' | 'noSignal' | 'stale'
>;

/**
 * A new run's policy: the Hub model's weights or a new model drawn from the seed, as the warm-start trains it
 * (with adapters when it trains LoRA). The optimizer's state is made last, for what the run trains only (a full
 * model's moments made and dropped would stay in the CPU backend's pool, whose blocks other sizes cannot use).
 */
async function startRun(
  run: Pick<Run, 'cfg' | 'config' | 'plan'>,
  backend: Backend,
  pretrained: TransformerParams | null,
): Promise<RunStart> {
  const rng = new Rng(run.cfg.seed);
  const base = pretrained ?? initParams(run.config, rng, { backend });
  let params: TransformerParams;
  try {
    params = await run.plan.warmStart.attach(base, run, backend);
  } catch (e) {
    dispose(base);
    throw e;
  }
  return {
    rng,
    params,
    opt: adamwInit(trainableOf(params)),
    reference: null,
    at: { phase: 'warmstart', step: 0 },
    warmStartEval: null,
    finalEval: null,
    noSignal: null,
    stale: null,
  };
}

async function resume(
  dir: string,
  backend: Backend,
  command: Pick<Run, 'cfg' | 'config' | 'identity' | 'plan'>,
  loadBase: (() => Promise<TransformerParams>) | null,
): Promise<RunStart> {
  const ck = await loadRunCheckpoint(dir, backend, command.plan, command.cfg, loadBase);
  const refuse = (e: Error): never => {
    dispose([ck.params, ck.optimizer]);
    throw e;
  };
  if (ck.trainerState === null || ck.trainerState === undefined)
    refuse(new TrainConfigError('resume', dir, 'has no trainer state (phase, step) to resume from'));
  if (!ck.optimizer || !ck.rngs?.train)
    refuse(new TrainConfigError('resume', dir, 'lacks the optimizer state or the training RNG state'));
  // Nothing of the state is trusted until it agrees with its own types, the optimizer and the run's metrics.
  const parsed = parseTrainerState(ck.trainerState);
  if (E.isLeft(parsed)) return refuse(parsed.left);
  const state = parsed.right;
  const inPlace = command.cfg.outputDir !== null && resumesInPlace(command.cfg.outputDir, dir);
  const damage =
    checkOptimizerStep(state, ck.optimizer!.step) ??
    (await checkMetrics(state, join(dirname(dir), METRICS_FILE), inPlace));
  if (damage) refuse(damage);
  const limit = state.phase === 'rl' ? 'steps' : 'warmStartSteps';
  if (state.step > command.cfg[limit])
    refuse(
      new TrainConfigError(
        limit,
        command.cfg[limit],
        `is below the checkpoint's ${state.phase} step ${state.step} (${dir})`,
      ),
    );
  const rlStepsTaken = state.phase === 'rl' ? state.step : 0;
  const mismatch = checkResume(
    { config: ck.config, identity: state.identity, rlStepsTaken },
    { config: command.config, identity: command.identity },
  );
  if (mismatch) refuse(mismatch);
  const split = phaseMismatch(command.plan, ck.params, state.phase, state.step);
  if (split) refuse(split);
  // What the phase trains from these weights: the same policy, or (a full checkpoint at RL step 0 under LoRA) the
  // adapters' start, with a fresh optimizer for them.
  const at = { params: ck.params, opt: ck.optimizer! };
  const params = await trainsAt(command.plan, state.phase).attach(ck.params, command, backend);
  if (params !== ck.params) trainAnew(at, params);
  const out = command.cfg.outputDir;
  if (out && inPlace) await truncateMetrics(out, state.metricsBytes);
  return {
    rng: Rng.fromState(ck.rngs!.train!),
    params: at.params,
    opt: at.opt,
    reference: null,
    at: { phase: state.phase, step: state.step },
    warmStartEval: state.warmStartEval,
    finalEval: state.finalEval,
    noSignal: null,
    stale: null,
  };
}
