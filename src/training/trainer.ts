/**
 * The RLVR training loop: a supervised warm-start on worked solutions (`warm-start.ts`: so the policy starts with a
 * non-trivial pass rate, as RLVR assumes), then RL steps (`rl-phase.ts`: sample G completions per prompt, verify,
 * RCC and BICC, `numIterations` epochs of AdamW), held-out evaluation (pass@1 greedy, avg@k and pass@k), metrics
 * as JSON lines and checkpoints that resume exactly (the run's state and shared operations: `run.ts`). `train`
 * opens the run, runs the two loops and ends it.
 */
import * as E from 'fp-ts/lib/Either.js';
import { escapeControls } from '../core/errors.js';
import { dirname, join, resolve } from '../platform/files.js';
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { dispose } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { loadCheckpoint, saveCheckpoint } from '../nn/checkpoint.js';
import { adamwInit, type OptimizerState } from '../nn/optim.js';
import type { PyTree } from '../core/pytree.js';
import type { RngState } from '../core/rng.js';
import type { Json } from '../nn/checkpoint.js';
import {
  LORA_MODULES,
  initLora,
  mergeLora,
  readAdapter,
  readAdapterConfig,
  trainableOf,
  withLora,
  withoutLora,
  writeAdapterFiles,
  type LoraConfig,
  type LoraWeights,
} from '../nn/lora.js';
import { isLoraCheckpoint, loadLoraCheckpoint } from '../nn/lora-checkpoint.js';
import { writePlainDirAtomic } from '../nn/atomic-dir.js';
import { initParams, type TransformerConfig, type TransformerParams } from '../nn/transformer.js';
import { openBackend } from '../backends/registry.js';
import type { Problem, Task } from '../tasks/task.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import type { EvalResult } from './evaluate.js';
import type { MetricRecord } from './metrics.js';
import { yieldToEventLoop } from '../platform/host.js';
import { abortReason, InterruptedError } from './interrupted.js';
import { METRICS_FILE, type OutputLock, prepareOutputDir, resumesInPlace, truncateMetrics } from './output-dir.js';
import { checkResume, ResumeMismatchError, type DatasetIdentity } from './resume-check.js';
import { sha256File } from '../platform/host.js';
import { FileSystemError } from '../nn/atomic-dir.js';
import { checkMetrics, checkOptimizerStep, parseTrainerState } from './trainer-state.js';
import { checkFits, estimateTrainingMemory, formatBytes, type MemoryLimits, type RunShape } from '../nn/memory.js';
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
import {
  DEFAULT_KEEP_RECORDS,
  runEval,
  save,
  setup,
  type RlFaults,
  type Run,
  type TrainHooks,
  type TrainWarning,
} from './run.js';
import { warmStartReached, warmStartStep } from './warm-start.js';
import { rlStep } from './rl-phase.js';

export type { RlFaults, RolloutView, TrainHooks, TrainWarning } from './run.js';
export { DEFAULT_KEEP_RECORDS, taskFor } from './run.js';
export { WARM_START_CHECK_EVERY, WARM_START_VALIDATION } from './warm-start.js';
export { NO_SIGNAL_WARN_STEPS, BICC_CONTEXT_WARN_NATS } from './rl-phase.js';

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
  if (cfg.outputDir) await saveOutputs(run, pretrained, cfg.outputDir, opts);
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
  const lora = cfg.adapter ? await adapterConfig(cfg.adapter) : cfg.lora;
  const task = opts.task ?? (cfg.dataset ? await loadDatasetTask(cfg.dataset, opts.signal) : undefined);
  // The dataset's identity for resuming: a checkpoint resumes only on the same rows (ResumeMismatchError).
  const dataset = !opts.task && cfg.dataset ? await datasetIdentity(cfg.dataset) : null;
  const base = setup(cfg, task, pretrained, lora, dataset);
  if (E.isLeft(base)) throw base.left;
  if (pretrained) checkTokenizerCarries(base.right.tokenizer, base.right.config.vocabSize, base.right.task, cfg.seed);
  await checkDatasetRows(base.right.task, base.right.tokenizer, base.right.config.maxSeqLen, cfg, opts.signal);
  const { tokenizer: tok, task: runTask, needsReference } = base.right;
  // Under LoRA a Hub model's frozen matrices stay in their stored dtype (bf16/f16), widened inside the kernels.
  const frozenBytes = lora && pretrained ? pretrained.storedBytesPerParameter : 4;
  const shape = runShape(cfg, tok, runTask, needsReference, lora, !backend.batchInvariant, frozenBytes);
  const estimate = estimateTrainingMemory(base.right.config, shape);
  opts.onMemoryEstimate?.(estimate);
  const host = defaultMemoryLimits(cfg);
  const device = backend.maxMemoryBytes ?? Number.POSITIVE_INFINITY;
  const limits = opts.memoryLimits ?? {
    totalBytes: Math.min(host.totalBytes, device),
    maxBufferBytes: backend.maxBufferBytes,
    source: device < host.totalBytes ? (backend.memoryNote ?? `the ${backend.name} backend's memory`) : host.source,
  };
  const refusal = checkFits(estimate, limits, () =>
    fittingAlternatives(base.right.config, shape, limits.totalBytes, cfg, backend.name, host.totalBytes),
  );
  if (refusal) throw refusal;
  if (cfg.outputDir) {
    const inputs = [['--model', cfg.modelDir] as const, ['--dataset', cfg.dataset] as const];
    held.push(await prepareOutputDir(cfg.outputDir, { resume: cfg.resume, overwrite: cfg.overwrite, inputs }));
  }
  const allowNonFinite = cfg.allowNonFiniteWeights;
  const loadBase = async () =>
    await loadPretrainedParams(pretrained!, backend, { allowNonFinite, keepDType: lora !== null });
  const started = cfg.resume
    ? await resume(cfg.resume, backend, base.right, pretrained ? loadBase : null)
    : await startRun(base.right, backend, pretrained ? await loadBase() : null);
  return { run: { ...base.right, ...started }, pretrained };
}

/**
 * What would fit where the run does not, each with its estimate: LoRA, gradient checkpointing, both, one group per
 * minibatch, or a backend without the CPU backend's WebAssembly limit.
 */
function fittingAlternatives(
  config: TransformerConfig,
  shape: RunShape,
  limit: number,
  cfg: TrainConfig,
  backendName: string,
  hostBytes: number,
): string[] {
  const out: string[] = [];
  const allLinear = { r: 16, targetModules: LORA_MODULES };
  const tryShape = (label: string, over: Partial<RunShape>): void => {
    const e = estimateTrainingMemory(config, { ...shape, ...over });
    if (e.total <= limit) out.push(`${label} (${formatBytes(e.total)})`);
  };
  if (!shape.lora) tryShape('LoRA: --lora-r 16 --lora-target-modules all-linear', { lora: allLinear });
  if (!shape.remat) tryShape('--gradient-checkpointing', { remat: true });
  if (!shape.lora && !shape.remat)
    tryShape('LoRA (r 16, all-linear) with --gradient-checkpointing', { lora: allLinear, remat: true });
  if (shape.minibatchRows > cfg.numGenerations)
    tryShape('--groups-per-minibatch 1', { minibatchRows: cfg.numGenerations });
  if (backendName === 'cpu' && estimateTrainingMemory(config, shape).total <= hostBytes)
    out.push(`--backend webgpu, whose memory is the device's, not a WebAssembly memory's`);
  return out;
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
    run.opt = adamwInit(trainableOf(run.params));
    run.at = { phase: 'rl', step: 0 };
    // Under LoRA the reference is the base model with the adapters switched off, as TRL does with peft: no second
    // copy of the weights and nothing to save (the base is --model's, or the checkpoint's own).
    if (run.needsReference) run.reference = stopGradient(withoutLora(run.params));
    if (cfg.outputDir && !run.lora) await saveReference(run.config, run.params, join(cfg.outputDir, 'reference'));
  } else if (run.needsReference && run.lora) {
    run.reference = stopGradient(withoutLora(run.params));
  } else if (run.needsReference) {
    const from = join(dirname(cfg.resume!), 'reference');
    run.reference = await loadReference(from, backend);
    // A resumed run writing elsewhere keeps its reference beside its own checkpoints, so it can be resumed too.
    const to = cfg.outputDir ? join(cfg.outputDir, 'reference') : null;
    if (to && resolve(to) !== resolve(from)) await saveReference(run.config, run.reference, to);
  }
}

/**
 * A checkpoint of the kind the command asks for: a LoRA run's (adapters on the base of --model, or on its own
 * base weights) or a full one. A LoRA command on a full checkpoint, the other way round, or adapters made another
 * way (rank, alpha, targets, ...) differ from the run the command states: refused, naming what differs.
 */
async function loadAnyCheckpoint(
  dir: string,
  backend: Backend,
  command: Pick<Run, 'cfg' | 'lora'>,
  loadBase: (() => Promise<TransformerParams>) | null,
): Promise<{
  config: TransformerConfig;
  params: TransformerParams;
  optimizer?: OptimizerState<PyTree>;
  rngs?: Readonly<Record<string, RngState>>;
  trainerState?: Json;
}> {
  const allowNonFinite = command.cfg.allowNonFiniteWeights;
  const isLora = await isLoraCheckpoint(dir);
  if (isLora !== (command.lora !== null))
    throw new ResumeMismatchError(
      'lora',
      isLora ? 'LoRA adapters' : 'full fine-tuning',
      command.lora ? 'LoRA adapters' : 'full fine-tuning',
    );
  if (!command.lora) {
    const res = await loadCheckpoint(dir, { backend, allowNonFinite })();
    if (E.isLeft(res)) throw res.left;
    return res.right as typeof res.right & { optimizer?: OptimizerState<PyTree> };
  }
  const base = loadBase ? await loadBase() : undefined;
  const res = await loadLoraCheckpoint(dir, { backend, allowNonFinite, ...(base ? { base } : {}) })();
  if (E.isLeft(res)) {
    if (base) dispose(base);
    throw res.left;
  }
  const ck = res.right;
  for (const key of Object.keys(command.lora) as (keyof LoraConfig)[]) {
    if (JSON.stringify(ck.lora[key]) !== JSON.stringify(command.lora[key])) {
      dispose([ck.params, ck.optimizer]);
      throw new ResumeMismatchError(`lora.${key}`, ck.lora[key], command.lora[key]);
    }
  }
  return ck as typeof ck & { optimizer: OptimizerState<PyTree> };
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

/**
 * A new run's policy: the Hub model's weights or a new model drawn from the seed, and under LoRA its adapters (a
 * saved adapter's, `--adapter`, or new ones drawn after the base, so a new model draws as before). The optimizer's
 * state is made last, for what the run trains only (a full model's moments made and dropped would stay in the
 * CPU backend's pool, whose blocks other sizes cannot use).
 */
async function startRun(
  run: Pick<Run, 'cfg' | 'config' | 'lora'>,
  backend: Backend,
  pretrained: TransformerParams | null,
): Promise<RunStart> {
  const rng = new Rng(run.cfg.seed);
  const base = pretrained ?? initParams(run.config, rng, { backend });
  if (!run.lora) return startFrom(base, rng);
  let lora: LoraWeights;
  if (run.cfg.adapter) {
    const read = await readAdapter(run.cfg.adapter, run.config, backend, {
      allowNonFinite: run.cfg.allowNonFiniteWeights,
    });
    if (E.isLeft(read)) {
      dispose(base);
      throw read.left;
    }
    lora = read.right.lora;
  } else {
    lora = initLora(run.config, run.lora, rng, { backend });
  }
  return startFrom(withLora(base, lora), rng);
}

/** The LoRA config of a saved adapter (`--adapter DIR`), read before anything is allocated. */
async function adapterConfig(dir: string): Promise<LoraConfig> {
  const config = await readAdapterConfig(dir);
  if (E.isLeft(config)) throw config.left;
  return config.right;
}

/**
 * What a run leaves in its output directory at the end: under LoRA the adapter in peft's layout (`OUTPUT/adapter`),
 * and a Hub model (`OUTPUT/model`: weights, config, tokenizer, which transformers loads) for a run from one: its
 * trained weights, or under LoRA with --merge-lora the base with the adapters merged in.
 */
async function saveOutputs(
  run: Run,
  pretrained: PretrainedParts | null,
  out: string,
  hooks: TrainHooks,
): Promise<void> {
  const { cfg } = run;
  if (run.lora) {
    const lora = run.lora;
    await writePlainDirAtomic(join(out, 'adapter'), (tmp) =>
      writeAdapterFiles(tmp, run.params.lora!, lora, cfg.modelDir),
    );
  }
  if (!pretrained || (run.lora && !cfg.mergeLora)) return;
  const model = run.lora ? mergeLora(run.params) : run.params;
  let skipped: readonly string[];
  try {
    skipped = await savePretrained(join(out, 'model'), model, pretrained, cfg.saveDtype);
  } finally {
    if (model !== run.params) dispose(model);
  }
  if (skipped.length === 0) return;
  const message = escapeControls(
    `${join(out, 'model')} was saved without ${skipped.join(', ')} of ${pretrained.dir}: not a regular file there ` +
      '(a symbolic link is not followed out of the model directory); copy what it should hold by hand',
  );
  const warning: TrainWarning = {
    kind: 'skipped-companions',
    step: run.at.step,
    steps: 0,
    reward: Number.NaN,
    files: skipped,
    message,
  };
  if (hooks.onWarning) hooks.onWarning(warning);
  else console.warn(`warning: ${message}`);
}

function startFrom(params: TransformerParams, rng: Rng): RunStart {
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
  command: Pick<Run, 'cfg' | 'config' | 'identity' | 'lora'>,
  loadBase: (() => Promise<TransformerParams>) | null,
): Promise<RunStart> {
  const ck = await loadAnyCheckpoint(dir, backend, command, loadBase);
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

/** A dataset file's path as given and the SHA-256 of its content (read a chunk at a time). */
async function datasetIdentity(path: string): Promise<DatasetIdentity> {
  try {
    return { path, sha256: (await sha256File(path)).sha256 };
  } catch (e) {
    throw FileSystemError.from(path, e);
  }
}
