/**
 * A training run's state and the operations every phase shares: the hooks a caller gives, the run built from its
 * config (`setup`), metric records (`emit`), held-out evaluation (`runEval`), checkpoints (`save`), and taking or
 * refusing an update's result (`guardUpdate`, `adoptOrSkip`).
 */
import * as E from 'fp-ts/lib/Either.js';
import type { RecordedStep } from '../core/backend.js';
import { join } from '../platform/files.js';
import { Rng } from '../core/rng.js';
import { dispose, tidy } from '../core/scope.js';
import type { Json } from '../io/checkpoint.js';
import type { OptimizerState } from '../nn/optim.js';
import { smallConfig, validateConfig, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import { makeObjective, type BoundObjective } from '../objectives/registry.js';
import { tokenizerFor } from '../tasks/index.js';
import { TASKS } from '../tasks/registry.js';
import { heldOutProblems, type Problem, type Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import { evaluate, type EvalResult } from './evaluate.js';
import { MetricsWriter, type MetricRecord } from './metrics.js';
import type { UpdateResult } from './policy-update.js';
import { BatchError } from '../objectives/errors.js';
import { FileSystemError } from '../platform/errors.js';
import { crashPoint } from '../platform/host.js';
import { checkBounds } from './bounds.js';
import { DivergedError, firstNonFinite, STATE_METRIC } from './divergence.js';
import { METRICS_FILE, metricsBytes } from './output-dir.js';
import { runIdentity, type DatasetIdentity, type RunIdentity } from './resume-check.js';
import type { MemoryEstimate } from './memory.js';
import type { PretrainedParts } from './pretrained.js';
import type { PyTree } from '../core/pytree.js';
import { trainableOf } from '../nn/lora.js';
import { treeLeaves } from '../core/pytree.js';
import { sumSquares } from '../ops/optim.js';
import { mul } from '../ops/elementwise.js';
import type { Tensor } from '../core/tensor.js';
import { trainsAt, type TrainingPlan } from './trains.js';
import { recordSettings } from './trainer-state.js';

/**
 * The default of `keepRecords`: about 8 MB of records (about 0.8 KB of heap each, measured by
 * bench/long-run-memory.ts), up to twice that just before a trim. The CLI keeps none.
 */
export const DEFAULT_KEEP_RECORDS = 10_000;

/** The built-in task a config names (`TASKS`, the task registry), with its digits. */
export function taskFor(cfg: TrainConfig): Task<Problem> {
  return TASKS[cfg.task].make(cfg.digits);
}

/**
 * The held-out prompts a run evaluates: `n` from the task's held-out split, drawn from a fixed seed (the same for
 * every run of the task, whatever its --seed). `rlvr export-data` writes the same list.
 */
export function heldOutFor<P extends Problem>(task: Task<P>, n: number): P[] {
  return heldOutProblems(task, n, 1234);
}

/** What a caller of `train` hears from the run as it goes. */
export interface TrainHooks {
  /** Every metric record, as it is written. */
  readonly onRecord?: (record: MetricRecord) => void;
  /** Called once per step with the phase's progress, for a progress display. */
  readonly onProgress?: (p: { phase: 'warmstart' | 'rl'; step: number; total: number; record: MetricRecord }) => void;
  /**
   * The memory estimate, before anything is allocated, once the backend has made room for it (`reserveFor`: the CPU
   * backend may have taken its memory64 build, which its `describe()` then names).
   */
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
 *
 * `skipped-companions`: the trained model was saved without some of the model directory's tokenizer or
 * generation files (`files`), because they are not regular files there (a symbolic link is never followed out of
 * the directory). Said once, after the save; `steps` is 0 and `reward` NaN.
 *
 * `saturated-bf16`: OUTPUT/model was written in bf16 (`--save-dtype bf16`) with some finite weights past bf16's
 * range (|w| >= 3.3961e38, a full fine-tune's or a LoRA merge's), which bf16 rounds to infinity: they were written
 * as its largest finite value with their sign (`tensors`), so the model loads. Said once, after the save, as above.
 *
 * `bicc-context`: on a BICC step the mean per-token log pi_old(o|q) - log pi_old(o|c, q) over the conditioned rows
 * (`logRatio`) was beyond BICC_CONTEXT_WARN_NATS: the policy does not read the inserted context as the same task,
 * so BICC changes the objective rather than sharpening it. Said once per run; `steps` is 1 and `reward` NaN.
 */
export interface TrainWarning {
  readonly kind: 'no-signal' | 'skipped-companions' | 'bicc-context' | 'saturated-bf16';
  /** The RL step the warning is about (1-based, as in the metrics). */
  readonly step: number;
  readonly steps: number;
  /** The mean reward over those steps. */
  readonly reward: number;
  /** `bicc-context`: the step's mean per-token log-ratio, plain over conditioned. */
  readonly logRatio?: number;
  /** `skipped-companions`: the files left out. */
  readonly files?: readonly string[];
  /** `saturated-bf16`: the tensors (Hugging Face names) holding saturated values. */
  readonly tensors?: readonly string[];
  readonly message: string;
}

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

export interface RolloutView {
  readonly step: number;
  readonly prompts: readonly string[];
  readonly promptIndex: readonly number[];
  readonly completions: readonly string[];
  readonly rewards: readonly number[];
}

export interface Phase {
  phase: 'warmstart' | 'rl';
  step: number;
}

/** Everything a run needs, built from the config (and a checkpoint when resuming). */
export interface Run {
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
  /** What each phase trains (`trains.ts`): every weight, or LoRA adapters on a frozen base. */
  readonly plan: TrainingPlan;
  rng: Rng;
  /** The policy (with its adapters, under LoRA). */
  params: TransformerParams;
  /** AdamW's state over what the run trains, `trainableOf(params)`: every weight, or only the adapters. */
  opt: OptimizerState<PyTree>;
  reference: TransformerParams | null;
  at: Phase;
  warmStartEval: EvalResult | null;
  /** The held-out result after RL, once the run has finished (a finished run resumed does not evaluate again). */
  finalEval: EvalResult | null;
  /** The current streak of RL steps without a group of mixed rewards (for the no-signal warning), or null. */
  noSignal: { steps: number; reward: number; lo: number; hi: number } | null;
  /** Test only (`RlFaults.staleSampler`): the policy the RL phase started with. */
  stale: TransformerParams | null;
  /** Whether the run has said that its policy does not read BICC's context as the same task (said once). */
  biccContextWarned?: boolean;
  /**
   * The warm-start's recorded steps by batch shape (`warm-start.ts`, where the backend records), `warming` after a
   * shape's first step (run op by op), until the warm-start ends.
   */
  recorded?: Map<string, RecordedStep<never, unknown> | 'warming'> | undefined;
}

export function setup(
  cfg: TrainConfig,
  userTask: Task<Problem> | undefined,
  pretrained: PretrainedParts | null,
  plan: TrainingPlan,
  dataset: DatasetIdentity | null = null,
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
  const heldOut = heldOutFor(task, cfg.evalPrompts);
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
    plan,
    identity: runIdentity(cfg, objective.right.config, dataset),
    writer: new MetricsWriter(cfg.outputDir ? join(cfg.outputDir, METRICS_FILE) : null),
    records: [],
  });
}

/** A warning of the run's, to the caller's hook or, without one, the console. */
export function warn(hooks: TrainHooks, warning: TrainWarning): void {
  if (hooks.onWarning) hooks.onWarning(warning);
  else console.warn(`warning: ${warning.message}`);
}

export function emit(run: Run, record: MetricRecord, hooks: TrainHooks): void {
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

export async function runEval(run: Run, hooks: TrainHooks, label: string): Promise<EvalResult> {
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

export async function save(run: Run, dir: string): Promise<void> {
  const trainerState: Json = {
    phase: run.at.phase,
    step: run.at.step,
    warmStartEval: run.warmStartEval ? { ...run.warmStartEval } : null,
    finalEval: run.finalEval ? { ...run.finalEval } : null,
    identity: { ...run.identity, dataset: run.identity.dataset ? { ...run.identity.dataset } : null },
    metricsBytes: await metricsBytes(run.cfg.outputDir),
    settings: recordSettings(run.cfg),
  };
  const state = { params: run.params, opt: run.opt, rngs: { train: run.rng.state() }, trainerState };
  await trainsAt(run.plan, run.at.phase).save(dir, run, state);
}

/**
 * The sum of squares of what an update wrote, the trained weights and AdamW's moments, as one scalar tensor read
 * back with the step's metrics (under `STATE_METRIC`, never recorded): non-finite when some new weight or moment
 * is, and also when the f32 sum overflows (some entry past about 1.8e19, which a finite model can hold), so a
 * non-finite sum is only a suspicion that `stateIsFinite` settles. A finite loss and gradient norm do not show this: a learning rate of 1e308 turns every weight into NaN from
 * finite gradients. Under LoRA only the adapters change, so only they are summed. It only reads.
 */
export function updatedStateCheck(next: { params: TransformerParams; opt: OptimizerState<PyTree> }): Tensor {
  return sumSquares(treeLeaves([trainableOf(next.params), next.opt.m, next.opt.v]));
}

/**
 * Whether every weight and moment an update wrote is finite, entry by entry: the sum of squares of x * 0 over each
 * tensor is 0 when all its entries are finite and NaN otherwise, and cannot overflow. Asked only when the sum of
 * squares of `updatedStateCheck` is not finite (one pass over the state, a tensor at a time, so it holds one
 * tensor's copy more, never the state's).
 */
export async function stateIsFinite(next: {
  params: TransformerParams;
  opt: OptimizerState<PyTree>;
}): Promise<boolean> {
  for (const x of treeLeaves([trainableOf(next.params), next.opt.m, next.opt.v])) {
    const zero = tidy(() => sumSquares([mul(x, 0)]));
    const value = (await zero.data())[0]!;
    zero.dispose();
    if (value !== 0) return false;
  }
  return true;
}

/** The metrics without the state check's value, as a record shows them. */
export function withoutStateCheck<T extends Record<string, number>>(metrics: T): T {
  const { [STATE_METRIC]: _, ...rest } = metrics;
  return rest as T;
}

/**
 * Whether the trainer's AdamW steps take the state before them over (`adamwStep`'s `donate`: the step updates the
 * weights and moments in place, so it costs no copy of them). A run that skips a non-finite update must keep that
 * state to fall back on; one that stops (the default) never reads it again: nothing is saved after a
 * `DivergedError`.
 */
export const donatesUpdates = (cfg: Pick<TrainConfig, 'onNonFinite'>): boolean => cfg.onNonFinite === 'stop';

/**
 * Take the new parameters and moments if the step's loss, gradient norm and updated state
 * (`updatedStateCheck`, read as `STATE_METRIC`, and settled by `stateIsFinite` when its sum is not finite) are
 * finite. Otherwise stop with a
 * `DivergedError` (nothing is saved after it, so the last checkpoint is the last good state), or, with
 * `onNonFinite: 'skip'`, drop the update and keep the state from before the step. Returns what was skipped.
 */
export async function adoptOrSkip(
  run: Run,
  phase: 'warmstart' | 'rl',
  metrics: Readonly<Record<string, number>>,
  next: { params: TransformerParams; opt: OptimizerState<PyTree> },
): Promise<string | null> {
  let bad = firstNonFinite(metrics);
  // A sum of squares past f32's range with every entry finite is a large model, not a diverged one.
  if (bad?.[0] === STATE_METRIC && (await stateIsFinite(next))) bad = null;
  // Only the trained part is new each step: a frozen base is shared by the old and the new policy.
  if (!bad) {
    dispose([trainableOf(run.params), run.opt]);
    run.params = next.params;
    run.opt = next.opt;
    return null;
  }
  dispose([trainableOf(next.params), next.opt]);
  if (run.cfg.onNonFinite === 'stop') throw new DivergedError(phase, run.at.step + 1, bad[0], bad[1]);
  return `${bad[0]} = ${bad[1]}`;
}

/**
 * The objectives reject non-finite log-probs themselves (on the CPU): a policy that has diverged shows up there
 * first. That is the same verdict as a non-finite loss: stop, or skip the update.
 */
export function guardUpdate(run: Run, update: () => UpdateResult): UpdateResult & { skipped?: string } {
  try {
    return update();
  } catch (e) {
    if (!(e instanceof BatchError && e.kind === 'non-finite')) throw e;
    if (run.cfg.onNonFinite === 'stop') throw new DivergedError('rl', run.at.step + 1, `batch.${e.field}`, Number.NaN);
    return { params: run.params, opt: run.opt, metrics: {}, tokensScored: 0, skipped: e.message };
  }
}
