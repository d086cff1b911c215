/**
 * Whether a run fits before anything is allocated: the sizes it works at (`runShape`), the memory each phase's
 * training takes (`estimateTrainingMemory`, the larger phase counts), the limits it runs under, and a refusal that
 * names what would fit.
 */
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { LORA_MODULES } from '../nn/parameters.js';
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
 * estimate of its larger phase (`phases`: each phase's LoRA, or null for every weight), told to `onMemoryEstimate`.
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
  const estimates = shapes.map((shape) => estimateTrainingMemory(config, shape));
  const estimate = estimates.length === 1 ? estimates[0]! : phasesInSequence(estimates);
  // What would fit is asked of the first phase: with two, a new model's warm-start, which trains every weight.
  const shape = shapes[0]!;
  opts.onMemoryEstimate?.(estimate);
  const host = defaultMemoryLimits(cfg);
  const device = backend.maxMemoryBytes ?? Number.POSITIVE_INFINITY;
  const limits = opts.memoryLimits ?? {
    totalBytes: Math.min(host.totalBytes, device),
    maxBufferBytes: backend.maxBufferBytes,
    source: device < host.totalBytes ? (backend.memoryNote ?? `the ${backend.name} backend's memory`) : host.source,
  };
  const refusal = checkFits(estimate, limits, () =>
    fittingAlternatives(config, shape, limits.totalBytes, cfg, backend.name, host.totalBytes),
  );
  if (refusal) throw refusal;
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
  // LoRA saves memory on a Hub model only: a new model's warm-start trains every weight whatever RL trains.
  const loraHelps = !shape.lora && cfg.modelDir !== null;
  if (loraHelps) tryShape('LoRA: --lora-r 16 --lora-target-modules all-linear', { lora: allLinear });
  if (!shape.remat) tryShape('--gradient-checkpointing', { remat: true });
  if (loraHelps && !shape.remat)
    tryShape('LoRA (r 16, all-linear) with --gradient-checkpointing', { lora: allLinear, remat: true });
  if (shape.minibatchRows > cfg.numGenerations)
    tryShape('--groups-per-minibatch 1', { minibatchRows: cfg.numGenerations });
  if (backendName === 'cpu' && estimateTrainingMemory(config, shape).total <= hostBytes)
    out.push(`--backend webgpu, whose memory is the device's, not a WebAssembly memory's`);
  return out;
}
