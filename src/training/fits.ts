/**
 * Whether a run fits before anything is allocated: the sizes it works at (`runShape`), the memory each phase's
 * training takes (`estimateTrainingMemory`, the larger phase counts), the limits it runs under, and a refusal that
 * names what would fit.
 */
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { LORA_MODULES, type LoraModule } from '../nn/parameters.js';
import {
  checkFits,
  estimateTrainingMemory,
  formatBytes,
  phasesInSequence,
  type MemoryEstimate,
  type MemoryLimits,
  type RunLora,
  type RunShape,
} from './memory.js';
import type { TransformerConfig } from '../nn/transformer.js';
import { totalMemoryBytes } from '../platform/host.js';
import type { Problem, Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import type { TrainConfig } from './config.js';
import type { PretrainedParts } from './pretrained.js';
import { donatesUpdates } from './run.js';

/** The sizes a run works at: prompt tokens measured on prompts of the task (the longest of 32, plus a margin). */
export function runShape(
  cfg: TrainConfig,
  tokenizer: Tokenizer,
  task: Task<Problem>,
  withReference: boolean,
  lora: RunLora | null = cfg.lora,
  rescores = false,
  frozenBytesPerParameter = 4,
): RunShape {
  const rng = new Rng(cfg.seed + 7);
  let longest = 1;
  for (let i = 0; i < 32; i++) longest = Math.max(longest, tokenizer.promptIds(task.generatePrompt(rng).prompt).length);
  const g = cfg.numGenerations;
  return {
    sampledRows: Math.max(cfg.promptsPerStep * g, cfg.evalPrompts > 0 ? Math.min(cfg.evalPrompts, 100) * cfg.evalK : 0),
    sampledPrompts: Math.max(cfg.promptsPerStep, Math.min(cfg.evalPrompts, 100)),
    minibatchRows: (cfg.groupsPerMinibatch ?? cfg.promptsPerStep) * g,
    warmStartRows: cfg.warmStartSteps > 0 ? cfg.warmStartBatchSize : 0,
    promptTokens: Math.ceil(longest * 1.25),
    completionTokens: cfg.maxCompletionLength,
    withReference,
    lora,
    remat: cfg.gradientCheckpointing,
    rescores,
    frozenBytesPerParameter,
    donates: donatesUpdates(cfg),
    stepRows: cfg.promptsPerStep * g,
    epochs: cfg.numIterations,
  };
}

/**
 * The configured limit, or the host's memory; a limit above the host's memory is capped there unless
 * `allowOverHostMemory` says otherwise (a run past it would start allocating what the host cannot hold).
 */
export function defaultMemoryLimits(
  cfg: TrainConfig,
  hostBytes: number = totalMemoryBytes(),
): MemoryLimits & { source: string } {
  const host = { totalBytes: hostBytes, source: "the host's memory" };
  if (cfg.memoryLimitGb === null) return host;
  const limit = cfg.memoryLimitGb * 2 ** 30;
  if (limit <= hostBytes || cfg.allowOverHostMemory) return { totalBytes: limit, source: '--memory-limit-gb' };
  const above = `--memory-limit-gb ${cfg.memoryLimitGb} is above it; --allow-over-host-memory to use it anyway`;
  return { totalBytes: hostBytes, source: `${host.source}: ${above}` };
}

/** What `checkRunFits` reads of the run being opened. */
export interface RunToFit {
  readonly cfg: TrainConfig;
  readonly config: TransformerConfig;
  readonly tokenizer: Tokenizer;
  readonly task: Task<Problem>;
  readonly needsReference: boolean;
}

/**
 * Refuse (throw a `MemoryError` naming what would fit) a run whose estimate exceeds what the device holds: the
 * estimate of its larger phase (`phases`: each phase's LoRA, or null for every weight), told to `onMemoryEstimate` once
 * the backend has made room for it (`reserveFor`).
 */
export function checkRunFits(
  run: RunToFit,
  pretrained: PretrainedParts | null,
  phases: readonly (RunLora | null)[],
  backend: Backend,
  opts: { readonly memoryLimits?: MemoryLimits; readonly onMemoryEstimate?: (e: MemoryEstimate) => void },
): void {
  const { cfg, config } = run;
  const shapes = phases.map((lora) => {
    // Under LoRA a Hub model's frozen matrices stay in their stored dtype (bf16/f16), widened inside the kernels.
    const frozenBytes = lora && pretrained ? pretrained.storedBytesPerParameter : 4;
    const rescores = !backend.batchInvariant;
    return runShape(cfg, run.tokenizer, run.task, run.needsReference, lora, rescores, frozenBytes);
  });
  const estimate = estimatePhases(config, shapes);
  const host = defaultMemoryLimits(cfg);
  // Before the device's limit is read: a backend may take a larger memory for this run (the CPU backend's memory64),
  // and before the estimate is told, so that what the backend describes then is what the run uses.
  backend.reserveFor?.(estimate.total);
  opts.onMemoryEstimate?.(estimate);
  const device = backend.maxMemoryBytes ?? Number.POSITIVE_INFINITY;
  const limits = opts.memoryLimits ?? {
    totalBytes: Math.min(host.totalBytes, device),
    maxBufferBytes: backend.maxBufferBytes,
    source: device < host.totalBytes ? (backend.memoryNote ?? `the ${backend.name} backend's memory`) : host.source,
  };
  const refused: Refused = {
    cfg,
    config,
    shapes,
    frozenBytes: pretrained?.storedBytesPerParameter ?? 4,
    backendName: backend.name,
    largerMemory: backend.largerMemory,
    hostBytes: host.totalBytes,
  };
  const refusal = checkFits(estimate, limits, () => fittingAlternatives(refused, estimate, limits.totalBytes));
  if (refusal) throw refusal;
}

/** What the refusal's advice is computed from: the run's config and model, its phases' shapes, and where it runs. */
interface Refused {
  readonly cfg: TrainConfig;
  readonly config: TransformerConfig;
  readonly shapes: readonly RunShape[];
  /** Bytes per frozen parameter of the Hub model under LoRA (its stored dtype's). */
  readonly frozenBytes: number;
  readonly backendName: string;
  /** A larger memory the backend has on another runtime (the CPU backend's memory64), and how to get it. */
  readonly largerMemory?: { readonly bytes: number; readonly how: string };
  readonly hostBytes: number;
}

/**
 * The estimate of a run's phases (one, or a new model's full warm-start then LoRA RL), combined. Only the last
 * phase makes RL steps: the first of two updates once a step, whatever the RL step's updates.
 */
function estimatePhases(config: TransformerConfig, shapes: readonly RunShape[]): MemoryEstimate {
  const estimates = shapes.map((shape, i) =>
    estimateTrainingMemory(
      config,
      i < shapes.length - 1 ? { ...shape, stepRows: undefined, epochs: undefined } : shape,
    ),
  );
  return estimates.length === 1 ? estimates[0]! : phasesInSequence(estimates);
}

/** The estimate of the run with some of its sizes changed (in every phase), its phases combined as the refusal's. */
function estimateWith(r: Refused, over: Partial<RunShape>): MemoryEstimate {
  return estimatePhases(
    r.config,
    r.shapes.map((shape) => ({ ...shape, ...over })),
  );
}

/** The rows sampled at once when `evalPrompts` and `promptsPerStep` are these (`runShape`'s rule). */
const sampledRows = (cfg: TrainConfig, evalPrompts: number, promptsPerStep: number): number =>
  Math.max(promptsPerStep * cfg.numGenerations, evalPrompts > 0 ? Math.min(evalPrompts, 100) * cfg.evalK : 0);

/**
 * The estimate's largest part and the flag that shrinks it, for the refusal: the model's parameters with what
 * trains them (gradients, AdamW, a reference), the activations of the widest forward and backward (a warm-start
 * batch or an RL minibatch), sampling (a step's rollouts or the held-out evaluation's batch), or RoPE's tables.
 */
function largestTerm(r: Refused, e: MemoryEstimate): string {
  const { cfg } = r;
  const shape = r.shapes[0]!;
  const parameters = e.weights + e.gradients + e.adamMoments + e.optimizerStep + e.stepStart + e.reference;
  const model = (): string => {
    const shrink =
      cfg.modelDir === null
        ? 'a smaller model: --d-model, --n-layers'
        : shape.lora
          ? 'a smaller --lora-r, fewer --lora-target-modules'
          : 'LoRA, which trains adapters only: --lora-r';
    return `the model's ${(e.parameters / 1e6).toFixed(2)}M parameters with their gradients and AdamW state (${shrink})`;
  };
  const activations = (): string =>
    (shape.warmStartRows ?? 0) > shape.minibatchRows
      ? `the activations of a warm-start batch of ${cfg.warmStartBatchSize} (--warm-start-batch-size)`
      : `the activations of an RL minibatch of ${shape.minibatchRows} rollouts (--groups-per-minibatch)`;
  const sampling = (): string =>
    sampledRows(cfg, cfg.evalPrompts, 0) > cfg.promptsPerStep * cfg.numGenerations
      ? `sampling the held-out evaluation's ${shape.sampledRows} rows at once (--eval-prompts, --eval-k)`
      : `sampling a step's ${shape.sampledRows} rollouts (--prompts-per-step, --num-generations)`;
  const rope = (): string =>
    `RoPE's tables for the model's ${r.config.maxSeqLen} positions (max_position_embeddings of its config.json)`;
  const terms: [number, () => string][] = [
    [parameters, model],
    [e.activations, activations],
    [e.sampling, sampling],
    [e.rope, rope],
  ];
  const [bytes, describe] = terms.reduce((a, b) => (b[0] > a[0] ? b : a));
  return `${describe()}, ${formatBytes(bytes)}`;
}

/** The largest of the values `from / 2, from / 4, ..., 1` whose estimate fits, with it; null when none does. */
function largestFitting(from: number, fits: (n: number) => MemoryEstimate | null): [number, MemoryEstimate] | null {
  for (let n = Math.floor(from / 2); n >= 1; n = Math.floor(n / 2)) {
    const e = fits(n);
    if (e) return [n, e];
  }
  return null;
}

/**
 * What would fit where the run does not, each with its estimate: LoRA (on a Hub model), gradient checkpointing, the
 * largest warm-start batch, groups per minibatch, held-out prompts or prompts per step that fit, or a backend
 * without the CPU backend's WebAssembly limit. And the largest term of the estimate, with the flag that shrinks it.
 */
function fittingAlternatives(r: Refused, e: MemoryEstimate, limit: number): { fits: string[]; largest: string } {
  const { cfg } = r;
  const shape = r.shapes[0]!;
  const fits: string[] = [];
  const within = (over: Partial<RunShape>): MemoryEstimate | null => {
    const estimate = estimateWith(r, over);
    return estimate.total <= limit ? estimate : null;
  };
  const tryShape = (label: string, over: Partial<RunShape>): void => {
    const estimate = within(over);
    if (estimate) fits.push(`${label} (${formatBytes(estimate.total)})`);
  };
  const tryFlag = (flag: string, from: number, over: (n: number) => Partial<RunShape>): void => {
    const found = largestFitting(from, (n) => within(over(n)));
    if (found) fits.push(`${flag} ${found[0]} (${formatBytes(found[1].total)})`);
  };
  // LoRA saves memory on a Hub model only: a new model's warm-start trains every weight whatever RL trains.
  if (!shape.lora && cfg.modelDir !== null) {
    // Under LoRA the Hub model's frozen matrices stay in their stored dtype.
    const lora = (rank: number, targetModules: readonly LoraModule[]): Partial<RunShape> => ({
      lora: { r: rank, targetModules },
      frozenBytesPerParameter: r.frozenBytes,
    });
    const before = fits.length;
    tryShape('LoRA: --lora-r 16 --lora-target-modules all-linear', lora(16, LORA_MODULES));
    if (fits.length === before)
      tryShape("LoRA: --lora-r 8 --lora-target-modules q_proj,v_proj (peft's default)", lora(8, ['q_proj', 'v_proj']));
    if (!shape.remat)
      tryShape('LoRA (r 16, all-linear) with --gradient-checkpointing', { ...lora(16, LORA_MODULES), remat: true });
  }
  if (!shape.remat) tryShape('--gradient-checkpointing', { remat: true });
  const sizesFrom = fits.length;
  if ((shape.warmStartRows ?? 0) > 1)
    tryFlag('--warm-start-batch-size', cfg.warmStartBatchSize, (n) => ({ warmStartRows: n }));
  const groups = shape.minibatchRows / cfg.numGenerations;
  if (groups > 1) tryFlag('--groups-per-minibatch', groups, (n) => ({ minibatchRows: n * cfg.numGenerations }));
  const evaluation = sampledRows(cfg, cfg.evalPrompts, 0);
  if (evaluation > cfg.promptsPerStep * cfg.numGenerations)
    tryFlag('--eval-prompts', Math.min(cfg.evalPrompts, 100), (n) => ({
      sampledRows: sampledRows(cfg, n, cfg.promptsPerStep),
    }));
  else if (cfg.promptsPerStep > 1)
    tryFlag('--prompts-per-step', cfg.promptsPerStep, (n) => ({
      sampledRows: sampledRows(cfg, cfg.evalPrompts, n),
      minibatchRows: Math.min(shape.minibatchRows, n * cfg.numGenerations),
      stepRows: n * cfg.numGenerations,
    }));
  if (fits.length === sizesFrom) tryBatchesTogether(r, within, fits);
  const larger = r.largerMemory;
  if (larger && e.total <= Math.min(larger.bytes, r.hostBytes)) fits.push(`${larger.how} (${formatBytes(e.total)})`);
  if (r.backendName === 'cpu' && e.total <= r.hostBytes)
    fits.push(`--backend webgpu, whose memory is the device's, not a WebAssembly memory's`);
  return { fits, largest: largestTerm(r, e) };
}

/**
 * When no batch alone shrinks the run enough (the warm-start batch takes over once the RL minibatch is halved, say),
 * the warm-start batch, the groups per minibatch and the held-out prompts halved together, until they fit.
 */
function tryBatchesTogether(
  r: Refused,
  within: (over: Partial<RunShape>) => MemoryEstimate | null,
  fits: string[],
): void {
  const { cfg } = r;
  const shape = r.shapes[0]!;
  const start = {
    warmStart: shape.warmStartRows ?? 0,
    groups: shape.minibatchRows / cfg.numGenerations,
    evalPrompts: cfg.evalPrompts > 0 ? Math.min(cfg.evalPrompts, 100) : 0,
  };
  const shrink = (n: number, k: number): number => (n > 0 ? Math.max(1, Math.floor(n / k)) : 0);
  for (let k = 2; ; k *= 2) {
    const warmStart = shrink(start.warmStart, k);
    const groups = shrink(start.groups, k);
    const evalPrompts = shrink(start.evalPrompts, k);
    const estimate = within({
      warmStartRows: warmStart,
      minibatchRows: groups * cfg.numGenerations,
      sampledRows: sampledRows(cfg, evalPrompts, cfg.promptsPerStep),
    });
    if (estimate) {
      const flags = [
        ...(warmStart < start.warmStart ? [`--warm-start-batch-size ${warmStart}`] : []),
        ...(groups < start.groups ? [`--groups-per-minibatch ${groups}`] : []),
        ...(evalPrompts < start.evalPrompts ? [`--eval-prompts ${evalPrompts}`] : []),
      ];
      fits.push(`${flags.join(' ')} (${formatBytes(estimate.total)})`);
      return;
    }
    if (warmStart <= 1 && groups <= 1 && evalPrompts <= 1) return;
  }
}
