import * as E from 'fp-ts/lib/Either.js';
import { dirname, join, resolve } from '../platform/files.js';
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { dispose, tidy } from '../core/scope.js';
import { stopGradient, valueAndGrad } from '../core/transforms.js';
import { loadCheckpoint, saveCheckpoint, type Json } from '../nn/checkpoint.js';
import { adamwInit, adamwStep, type OptimizerState } from '../nn/optim.js';
import { lrAt } from '../nn/schedule.js';
import {
  initParams,
  smallConfig,
  validateConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../nn/transformer.js';
import { makeObjective, type BoundObjective } from '../objectives/registry.js';
import { groupStats } from '../objectives/groups.js';
import { sampleRollouts, type Rollouts } from '../rl/sampler.js';
import { rescoreOldLogProbs } from '../rl/score.js';
import { openBackend } from '../backends/registry.js';
import { sftBatch, sftExamples, sftLoss } from '../rl/sft.js';
import { TASKS } from '../tasks/registry.js';
import { tokenizerFor } from '../tasks/index.js';
import { heldOutProblems, sampleProblems, type Problem, type Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import { evaluate, type EvalResult } from './evaluate.js';
import { MetricsWriter, readMetrics, type MetricRecord } from './metrics.js';
import { updatePolicy, type AdamWSettings, type UpdateResult } from './rl-step.js';
import { interventions } from './interventions.js';
import { BatchError } from '../objectives/errors.js';
import { FileSystemError } from '../nn/atomic-dir.js';
import { crashPoint, yieldToEventLoop } from '../platform/host.js';
import { checkBounds } from './bounds.js';
import { DivergedError, firstNonFinite } from './divergence.js';
import { abortReason, InterruptedError } from './interrupted.js';
import {
  METRICS_FILE,
  metricsBytes,
  type OutputLock,
  prepareOutputDir,
  resumesInPlace,
  truncateMetrics,
} from './output-dir.js';
import { checkResume, runIdentity, type RunIdentity } from './resume-check.js';
import { checkMetrics, checkOptimizerStep, parseTrainerState } from './trainer-state.js';
import { checkFits, estimateTrainingMemory, type MemoryEstimate, type MemoryLimits } from '../nn/memory.js';
import {
  checkDatasetRows,
  checkTokenizerCarries,
  defaultMemoryLimits,
  loadDatasetTask,
  loadPretrainedParams,
  readPretrained,
  runShape,
  savePretrained,
  type PretrainedParts,
} from './pretrained.js';

/**
 * The RLVR training loop: a supervised warm-start on worked solutions (so the policy starts with a non-trivial
 * pass rate, as RLVR assumes), then RL steps (sample G completions per prompt, verify, advantages, objective,
 * `numIterations` epochs of AdamW), held-out evaluation (pass@1 greedy, avg@k and pass@k), metrics as JSON
 * lines, checkpoints that resume exactly.
 */
export interface TrainHooks {
  /** Every metric record, as it is written. */
  readonly onRecord?: (record: MetricRecord) => void;
  /** Called once per step with the phase's progress, for a progress display. */
  readonly onProgress?: (p: { phase: 'warmstart' | 'rl'; step: number; total: number; record: MetricRecord }) => void;
  /** The memory estimate, before anything is allocated. */
  readonly onMemoryEstimate?: (estimate: MemoryEstimate) => void;
  /** Each RL step's rollouts with the verifier's rewards, for a display (row r answers `prompts[promptIndex[r]]`). */
  readonly onRollouts?: (r: RolloutView) => void;
  /**
   * How many of the latest metric records `result.records` keeps (default DEFAULT_KEEP_RECORDS): memory stays
   * bounded however long the run; the whole history is in metrics.jsonl and goes through `onRecord`.
   */
  readonly keepRecords?: number;
  /** What the trainer warns about (default: `console.warn` of the message). */
  readonly onWarning?: (w: TrainWarning) => void;
}

/**
 * `no-signal`: for `steps` RL steps in a row every group's rewards were equal, so every advantage was zero and no
 * objective had anything to learn from (all wrong: the task is too hard for the policy as it samples; all right:
 * it is solved). Said once per such streak, when it reaches `NO_SIGNAL_WARN_STEPS`.
 */
export interface TrainWarning {
  readonly kind: 'no-signal';
  /** The RL step the warning is about (1-based, as in the metrics). */
  readonly step: number;
  readonly steps: number;
  /** The mean reward over those steps. */
  readonly reward: number;
  readonly message: string;
}

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

/** RL steps in a row without a group of mixed rewards before the trainer warns. */
export const NO_SIGNAL_WARN_STEPS = 5;

/**
 * @internal Test only: deliberately broken RL loops, so the sanity specs (`spec/training/rl-sanity.spec.ts`) can
 * show that they fail the bar a correct loop clears. Never set outside specs.
 */
export interface RlFaults {
  /**
   * The sign of the learning signal flipped: the objective sees each reward r as (max + min) - r over the step,
   * which negates every group-relative advantage exactly (RCC's too) and swaps the classes of the contrastive
   * objectives; the metrics keep the true rewards.
   */
  readonly flipAdvantageSign?: boolean;
  /** A stale policy sampled: rollouts (and pi_old) come from the policy the RL phase started with, never refreshed. */
  readonly staleSampler?: boolean;
}

/** The default of `keepRecords`: about 5 MB of records. */
export const DEFAULT_KEEP_RECORDS = 10_000;

export interface RolloutView {
  readonly step: number;
  readonly prompts: readonly string[];
  readonly promptIndex: readonly number[];
  readonly completions: readonly string[];
  readonly rewards: readonly number[];
}

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

/**
 * The run's result in one line, every number named: `held-out pass@1 (200 prompts): after warm-start 0.412, after
 * RL 0.455 (RL changed it by +0.043)`.
 */
export function heldOutLine(prompts: number, before: number | null, after: number): string {
  const head = `held-out pass@1 (${prompts} prompts): `;
  if (before === null) return `${head}after RL ${after.toFixed(3)}`;
  const change = after - before;
  return (
    `${head}after warm-start ${before.toFixed(3)}, after RL ${after.toFixed(3)} ` +
    `(RL changed it by ${change >= 0 ? '+' : '-'}${Math.abs(change).toFixed(3)})`
  );
}

/** The built-in task a config names (`TASKS`, the task registry), with its digits. */
export function taskFor(cfg: TrainConfig): Task<Problem> {
  return TASKS[cfg.task].make(cfg.digits);
}

interface Phase {
  phase: 'warmstart' | 'rl';
  step: number;
}

/** Everything a run needs, built from the config (and a checkpoint when resuming). */
interface Run {
  readonly cfg: TrainConfig;
  readonly task: Task<Problem>;
  readonly tokenizer: Tokenizer;
  readonly config: TransformerConfig;
  readonly objective: BoundObjective;
  readonly needsReference: boolean;
  readonly heldOut: readonly Problem[];
  readonly identity: RunIdentity;
  readonly writer: MetricsWriter;
  readonly records: MetricRecord[];
  rng: Rng;
  params: TransformerParams;
  opt: OptimizerState<TransformerParams>;
  reference: TransformerParams | null;
  at: Phase;
  warmStartEval: EvalResult | null;
  /** The held-out result after RL, once the run has finished (a finished run resumed does not evaluate again). */
  finalEval: EvalResult | null;
  /** The current streak of RL steps without a group of mixed rewards (for the no-signal warning), or null. */
  noSignal: { steps: number; reward: number; lo: number; hi: number } | null;
  /** Test only (`RlFaults.staleSampler`): the policy the RL phase started with. */
  stale: TransformerParams | null;
}

function setup(
  cfg: TrainConfig,
  userTask: Task<Problem> | undefined,
  pretrained: PretrainedParts | null,
): E.Either<
  TrainConfigError,
  Omit<Run, 'params' | 'opt' | 'reference' | 'at' | 'warmStartEval' | 'finalEval' | 'rng' | 'noSignal' | 'stale'>
> {
  const task = userTask ?? taskFor(cfg);
  const tokenizer = pretrained?.tokenizer ?? tokenizerFor(task);
  let config: TransformerConfig;
  try {
    config = pretrained?.config ?? validateConfig(smallConfig(tokenizer.vocabSize, { ...cfg.model }));
  } catch (e) {
    return E.left(new TrainConfigError('model', cfg.model, e instanceof Error ? e.message : String(e)));
  }
  const objectiveOptions = { ...cfg.objectiveOptions };
  const objective = makeObjective(cfg.objective, objectiveOptions);
  if (E.isLeft(objective))
    return E.left(
      new TrainConfigError(`objective.${objective.left.field}`, objective.left.value, objective.left.message),
    );
  if (cfg.advantage === 'rcc' && !objective.right.usesAdvantages) {
    const why = `does not apply: ${cfg.objective} does not weigh rollouts by advantages`;
    return E.left(new TrainConfigError('advantage', cfg.advantage, why));
  }
  const bounds = checkBounds(cfg);
  if (bounds) return E.left(bounds);
  const heldOut = heldOutProblems(task, cfg.evalPrompts, 1234);
  const longest = heldOut.reduce((m, p) => Math.max(m, tokenizer.promptIds(p.prompt).length), 0);
  if (longest + cfg.maxCompletionLength > config.maxSeqLen) {
    const why = `plus the longest prompt (${longest} tokens) exceeds the model's maxSeqLen ${config.maxSeqLen}`;
    return E.left(new TrainConfigError('maxCompletionLength', cfg.maxCompletionLength, why));
  }
  return E.right({
    cfg,
    task,
    tokenizer,
    config,
    objective: objective.right,
    needsReference: objective.right.klToReference || cfg.advantage === 'rcc',
    heldOut,
    identity: runIdentity(cfg, objective.right.config),
    writer: new MetricsWriter(cfg.outputDir ? join(cfg.outputDir, METRICS_FILE) : null),
    records: [],
  });
}

function emit(run: Run, record: MetricRecord, hooks: TrainHooks): void {
  run.records.push(record);
  // Trimmed in batches (amortised O(1) per record): at most twice the bound is ever held.
  const keep = Math.max(0, hooks.keepRecords ?? DEFAULT_KEEP_RECORDS);
  if (run.records.length > 2 * keep) run.records.splice(0, run.records.length - keep);
  try {
    run.writer.write(record);
  } catch (e) {
    throw FileSystemError.from(run.writer.path ?? METRICS_FILE, e);
  }
  crashPoint('metrics:line');
  hooks.onRecord?.(record);
}

async function runEval(run: Run, hooks: TrainHooks, label: string): Promise<EvalResult> {
  const { cfg } = run;
  // Evaluation draws from its own generator so that evaluating does not shift the training stream.
  const result = await evaluate(run.params, run.config, run.tokenizer, run.task, run.heldOut, new Rng(cfg.seed + 991), {
    k: cfg.evalK,
    temperature: cfg.temperature,
    topP: cfg.topP,
    maxNewTokens: cfg.maxCompletionLength,
  });
  emit(
    run,
    {
      phase: 'eval',
      step: run.at.step,
      label,
      at: run.at.phase,
      pass_at_1: result.passAt1,
      [`avg_at_${result.k}`]: result.avgAtK,
      [`pass_at_${result.k}`]: result.passAtK,
    },
    hooks,
  );
  return result;
}

async function save(run: Run, dir: string): Promise<void> {
  const trainerState: Json = {
    phase: run.at.phase,
    step: run.at.step,
    warmStartEval: run.warmStartEval ? { ...run.warmStartEval } : null,
    finalEval: run.finalEval ? { ...run.finalEval } : null,
    identity: { ...run.identity },
    metricsBytes: await metricsBytes(run.cfg.outputDir),
  };
  const res = await saveCheckpoint(dir, {
    config: run.config,
    params: run.params,
    optimizer: run.opt,
    rngs: { train: run.rng.state() },
    trainerState,
  })();
  if (E.isLeft(res)) throw res.left;
}

/**
 * `warmStartUntil`: at every WARM_START_CHECK_EVERY-th step, greedy pass@1 on WARM_START_VALIDATION training-split
 * problems (the same for every run, drawn with their own generator so the training stream is not shifted); true once
 * it reaches the target. Recorded as an eval record labelled `warmstart-validation`.
 */
async function warmStartReached(run: Run, hooks: TrainHooks): Promise<boolean> {
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

async function warmStartStep(run: Run, hooks: TrainHooks): Promise<void> {
  const { cfg } = run;
  const t0 = performance.now();
  const examples = sftExamples(run.task, sampleProblems(run.task, cfg.warmStartBatchSize, run.rng));
  const batch = sftBatch(run.tokenizer, examples);
  const lr = lrAt(
    {
      peakLr: cfg.warmStartLearningRate,
      warmupSteps: Math.min(20, cfg.warmStartSteps),
      totalSteps: cfg.warmStartSteps,
      minLr: cfg.warmStartLearningRate / 10,
    },
    run.opt.step,
  );
  const next = tidy(() => {
    const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, run.config, batch))(run.params);
    const stepped = adamwStep(run.params, grads, run.opt, {
      lr,
      maxGradNorm: cfg.maxGradNorm,
      weightDecay: cfg.weightDecay,
    });
    return { params: stepped.params, opt: stepped.state, loss, gradNorm: stepped.gradNorm };
  });
  const read = await readMetrics({ loss: next.loss, grad_norm: next.gradNorm });
  const [loss, grad_norm] = [read.loss!, read.grad_norm!];
  const skipped = adoptOrSkip(run, 'warmstart', read, next);
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

/**
 * Take the new parameters and moments if the step's loss and gradient norm are finite. Otherwise stop with a
 * `DivergedError` (nothing is saved after it, so the last checkpoint is the last good state), or, with
 * `onNonFinite: 'skip'`, drop the update and keep the state from before the step. Returns what was skipped.
 */
function adoptOrSkip(
  run: Run,
  phase: 'warmstart' | 'rl',
  metrics: Readonly<Record<string, number>>,
  next: { params: TransformerParams; opt: OptimizerState<TransformerParams> },
): string | null {
  const bad = firstNonFinite(metrics);
  if (!bad) {
    dispose([run.params, run.opt]);
    run.params = next.params;
    run.opt = next.opt;
    return null;
  }
  dispose([next.params, next.opt]);
  if (run.cfg.onNonFinite === 'stop') throw new DivergedError(phase, run.at.step + 1, bad[0], bad[1]);
  return `${bad[0]} = ${bad[1]}`;
}

/**
 * The objectives reject non-finite log-probs themselves (on the CPU): a policy that has diverged shows up there
 * first. That is the same verdict as a non-finite loss: stop, or skip the update.
 */
function guardUpdate(run: Run, update: () => UpdateResult): UpdateResult & { skipped?: string } {
  try {
    return update();
  } catch (e) {
    if (!(e instanceof BatchError && e.kind === 'non-finite')) throw e;
    if (run.cfg.onNonFinite === 'stop') throw new DivergedError('rl', run.at.step + 1, `batch.${e.field}`, Number.NaN);
    return { params: run.params, opt: run.opt, metrics: {}, tokensScored: 0, skipped: e.message };
  }
}

function rlSettings(cfg: TrainConfig): (step: number) => AdamWSettings {
  const totalUpdates =
    cfg.steps * cfg.numIterations * Math.ceil(cfg.promptsPerStep / (cfg.groupsPerMinibatch ?? cfg.promptsPerStep));
  return (step) => ({
    lr: lrAt(
      { peakLr: cfg.learningRate, warmupSteps: Math.min(cfg.warmupSteps, totalUpdates), totalSteps: totalUpdates },
      step,
    ),
    maxGradNorm: cfg.maxGradNorm,
    weightDecay: cfg.weightDecay,
  });
}

async function rlStep(run: Run, hooks: TrainHooks, faults: RlFaults = {}): Promise<void> {
  const { cfg } = run;
  run.finalEval = null; // a result after RL holds for the step it was taken at only
  const t0 = performance.now();
  const problems = sampleProblems(run.task, cfg.promptsPerStep, run.rng);
  if (faults.staleSampler) run.stale ??= stopGradient(run.params);
  const sampled: Rollouts = await sampleRollouts(
    run.stale ?? run.params,
    run.config,
    run.tokenizer,
    problems.map((p) => p.prompt),
    run.rng,
    {
      groupSize: cfg.numGenerations,
      maxNewTokens: cfg.maxCompletionLength,
      temperature: cfg.temperature,
      topP: cfg.topP,
      refParams: run.needsReference ? run.reference : null,
    },
  );
  // Where the sampler's numbers may depend on the batch's shape, pi_old is re-scored by the training forward so
  // that the first ratio is exactly 1.
  const batchInvariant = run.params.embed.weight.backend.batchInvariant;
  const rollouts = batchInvariant ? sampled : await rescoreOldLogProbs(run.params, run.config, sampled);
  const rewards = rollouts.completions.map((c, r) => run.task.verify(c, problems[rollouts.promptIndex[r]!]!));
  // What the objective learns from: the rewards, unless a spec flips the signal's sign.
  const signal = faults.flipAdvantageSign ? reflected(rewards) : rewards;
  const { promptIndex, completions } = rollouts;
  hooks.onRollouts?.({
    step: run.at.step + 1,
    prompts: problems.map((p) => p.prompt),
    promptIndex,
    completions,
    rewards,
  });
  const applied = interventions(cfg, rollouts, rewards, signal, run.tokenizer, run.config);
  const sampledAt = performance.now();
  const settings = rlSettings(cfg);
  const rlStepIndex = run.at.step;
  const result = guardUpdate(run, () =>
    updatePolicy(
      { params: run.params, opt: run.opt },
      run.config,
      {
        rollouts,
        rewards: signal,
        advantages: applied.advantages,
        objective: run.objective,
        progress: { step: rlStepIndex, totalSteps: cfg.steps },
        numIterations: cfg.numIterations,
        groupsPerMinibatch: cfg.groupsPerMinibatch ?? cfg.promptsPerStep,
        maxCompletionLength: cfg.maxCompletionLength,
        ...(applied.scoredBatch ? { scoredBatch: applied.scoredBatch } : {}),
      },
      settings,
      run.rng,
    ),
  );
  const metrics = await readMetrics(result.metrics);
  const skipped = result.skipped ?? (result.params === run.params ? null : adoptOrSkip(run, 'rl', metrics, result));
  run.at.step++;
  const seconds = (performance.now() - t0) / 1000;
  const stats = groupStats(rewards, rollouts.promptIndex);
  const reward = rewards.reduce((s, x) => s + x, 0) / rewards.length;
  warnWithoutSignal(
    run,
    hooks,
    rewards,
    stats.every((s) => s.rewardStd === 0),
  );
  const sampledTokens = rollouts.completionLengths.reduce((s, x) => s + x, 0);
  const record: MetricRecord = {
    phase: 'rl',
    step: run.at.step,
    // The objective's metrics are its last minibatch's; the step's own reward over all rollouts comes after them.
    ...metrics,
    reward,
    groups_mixed: stats.filter((s) => s.rewardStd > 0).length / stats.length,
    // What the two interventions did this step, so a run shows they acted.
    ...applied.record,
    ...(skipped ? { skipped } : {}),
    lr: settings(run.opt.step - 1).lr,
    seconds,
    sample_seconds: (sampledAt - t0) / 1000,
    tokens_per_s: (sampledTokens + result.tokensScored) / seconds,
  };
  emit(run, record, hooks);
  hooks.onProgress?.({ phase: 'rl', step: run.at.step, total: cfg.steps, record });
}

/** Each reward r as (max + min) - r: centred rewards change sign, their spread and the range stay (RlFaults). */
function reflected(rewards: readonly number[]): number[] {
  const [lo, hi] = [Math.min(...rewards), Math.max(...rewards)];
  return rewards.map((r) => hi + lo - r);
}

/** Count RL steps in a row without a mixed group; warn once when a streak reaches NO_SIGNAL_WARN_STEPS. */
function warnWithoutSignal(run: Run, hooks: TrainHooks, rewards: readonly number[], noSignal: boolean): void {
  if (!noSignal) {
    run.noSignal = null;
    return;
  }
  const [lo, hi] = [Math.min(...rewards), Math.max(...rewards)];
  const sum = rewards.reduce((s, x) => s + x, 0) / rewards.length;
  const was = run.noSignal;
  const streak = was
    ? { steps: was.steps + 1, reward: was.reward + sum, lo: Math.min(was.lo, lo), hi: Math.max(was.hi, hi) }
    : { steps: 1, reward: sum, lo, hi };
  run.noSignal = streak;
  if (streak.steps !== NO_SIGNAL_WARN_STEPS) return;
  const n = streak.steps;
  const mean = streak.reward / n;
  const step = run.at.step; // already counts this step
  const why =
    streak.hi <= 0
      ? 'no rollout earned a reward: the task is too hard for the policy as it samples. A longer warm-start, a ' +
        'larger group (numGenerations), more prompts per step or another sampling temperature can give the groups a mix'
      : streak.lo === streak.hi
        ? 'every rollout earned the same reward: the task is solved at this temperature (or the reward is constant)'
        : 'each group agreed with itself (some all rewarded, others all not): the policy is deterministic on these ' +
          'prompts; a higher temperature or a larger group (numGenerations) can give the groups a mix';
  const message =
    `RL step ${step}: no learning signal for ${n} steps in a row (every group's rewards were equal, ` +
    `mean reward ${mean.toFixed(3)}), so every advantage is zero and the policy does not change; ${why}.`;
  const warning: TrainWarning = { kind: 'no-signal', step, steps: n, reward: mean, message };
  if (hooks.onWarning) hooks.onWarning(warning);
  else console.warn(`warning: ${message}`);
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

  while (run.at.phase === 'warmstart' && run.at.step < cfg.warmStartSteps) {
    // Checked before a step, so a run resumed at a check takes the same decision on the same parameters.
    if (await warmStartReached(run, opts)) break;
    await warmStartStep(run, opts);
    await maybeSave();
    await stopIfAsked();
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
  // A run from a Hub model ends with a Hub model directory (weights, config, tokenizer) that transformers loads.
  if (pretrained && cfg.outputDir) {
    await savePretrained(join(cfg.outputDir, 'model'), run.params, pretrained, cfg.saveDtype);
  }
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
  const base = setup(cfg, opts.task ?? (cfg.dataset ? await loadDatasetTask(cfg.dataset) : undefined), pretrained);
  if (E.isLeft(base)) throw base.left;
  if (pretrained) checkTokenizerCarries(base.right.tokenizer, base.right.config.vocabSize, base.right.task, cfg.seed);
  checkDatasetRows(base.right.task, base.right.tokenizer, base.right.config.maxSeqLen, cfg);
  const shape = runShape(cfg, base.right.tokenizer, base.right.task, base.right.needsReference);
  const estimate = estimateTrainingMemory(base.right.config, shape);
  opts.onMemoryEstimate?.(estimate);
  const host = defaultMemoryLimits(cfg);
  const limits = opts.memoryLimits ?? {
    totalBytes: Math.min(host.totalBytes, backend.maxMemoryBytes ?? Number.POSITIVE_INFINITY),
    maxBufferBytes: backend.maxBufferBytes,
  };
  const refusal = checkFits(estimate, limits);
  if (refusal) throw refusal;
  if (cfg.outputDir) {
    const inputs = [['--model', cfg.modelDir] as const, ['--dataset', cfg.dataset] as const];
    held.push(await prepareOutputDir(cfg.outputDir, { resume: cfg.resume, overwrite: cfg.overwrite, inputs }));
  }
  const started = cfg.resume
    ? await resume(cfg.resume, backend, base.right)
    : pretrained
      ? startFrom(
          await loadPretrainedParams(pretrained, backend, { allowNonFinite: cfg.allowNonFiniteWeights }),
          cfg.seed,
        )
      : fresh(base.right.config, cfg.seed, backend);
  return { run: { ...base.right, ...started }, pretrained };
}

/**
 * From the warm-start to RL: the warm-started policy's held-out evaluation, a fresh optimizer, and the frozen
 * reference policy (saved beside the checkpoints); a run resumed in RL loads its reference instead.
 */
async function beginRl(run: Run, hooks: TrainHooks, backend: Backend): Promise<void> {
  const { cfg } = run;
  if (run.at.phase === 'warmstart') {
    run.warmStartEval = await runEval(run, hooks, 'after-warmstart');
    // Tensors are immutable, so the reference is new handles over the same storage (no copy).
    dispose(run.opt);
    run.opt = adamwInit(run.params);
    run.at = { phase: 'rl', step: 0 };
    if (run.needsReference) run.reference = stopGradient(run.params);
    if (cfg.outputDir) await saveReference(run.config, run.params, join(cfg.outputDir, 'reference'));
  } else if (run.needsReference) {
    const from = join(dirname(cfg.resume!), 'reference');
    run.reference = await loadReference(from, backend);
    // A resumed run writing elsewhere keeps its reference beside its own checkpoints, so it can be resumed too.
    const to = cfg.outputDir ? join(cfg.outputDir, 'reference') : null;
    if (to && resolve(to) !== resolve(from)) await saveReference(run.config, run.reference, to);
  }
}

async function saveReference(config: TransformerConfig, params: TransformerParams, dir: string): Promise<void> {
  const res = await saveCheckpoint(dir, { config, params })();
  if (E.isLeft(res)) throw res.left;
}

async function loadReference(dir: string, backend: Backend): Promise<TransformerParams> {
  const res = await loadCheckpoint(dir, { backend })();
  if (E.isLeft(res)) throw res.left;
  return res.right.params;
}

/** The mutable part of a run at its start. */
type RunStart = Pick<
  Run,
  'rng' | 'params' | 'opt' | 'reference' | 'at' | 'warmStartEval' | 'finalEval' | 'noSignal' | 'stale'
>;

function fresh(config: TransformerConfig, seed: number, backend: Backend): RunStart {
  const rng = new Rng(seed);
  return startFrom(initParams(config, rng, { backend }), seed, rng);
}

function startFrom(params: TransformerParams, seed: number, rng = new Rng(seed)): RunStart {
  return {
    rng,
    params,
    opt: adamwInit(params),
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
  command: Pick<Run, 'cfg' | 'config' | 'identity'>,
): Promise<RunStart> {
  const res = await loadCheckpoint(dir, { backend, allowNonFinite: command.cfg.allowNonFiniteWeights })();
  if (E.isLeft(res)) throw res.left;
  const ck = res.right;
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
  const out = command.cfg.outputDir;
  if (out && inPlace) await truncateMetrics(out, state.metricsBytes);
  return {
    rng: Rng.fromState(ck.rngs!.train!),
    params: ck.params,
    opt: ck.optimizer!,
    reference: null,
    at: { phase: state.phase, step: state.step },
    warmStartEval: state.warmStartEval,
    finalEval: state.finalEval,
    noSignal: null,
    stale: null,
  };
}
