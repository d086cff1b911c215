import { RlvrError } from '../core/errors.js';
import { paramShapes } from '../nn/parameters.js';
import { headDim, type TransformerConfig } from '../nn/transformer.js';
import type { LoraModule } from '../nn/parameters.js';
import { moduleShape } from '../nn/lora.js';

/**
 * A training run's memory, estimated from the config before anything is allocated, so a run that cannot fit is
 * refused at the start instead of failing midway. It is meant as an upper bound of what the backends carve, and
 * it counts what this engine holds, not what an ideal one would:
 * - the tape keeps every intermediate of a training forward until its backward ends, and the backward's
 *   cotangents live until the step's scope closes (with gradient checkpointing, one layer's input per layer and
 *   one layer recomputed at a time);
 * - an AdamW step makes the new parameters and moments before the old ones are freed, unless the trainer donates
 *   them (`donates`: the step then writes into their storage, and allocates none);
 * - a run that does not donate keeps an RL step's starting parameters and moments until the step's result is
 *   checked (to drop it whole), so a step of several updates (minibatches, epochs) holds them beside the running
 *   state from its second update on;
 * - a trained tied embedding gets two gradients, the LM head's and the lookup's, which live beside their sum until
 *   the backward's scope closes (before the step: the larger of the two transients counts);
 * - a full fine-tune's KL reference keeps the weights RL started from alive once the policy moves (under LoRA the
 *   reference is the base with the adapters off: nothing more);
 * - the backends' pools never shrink and hand out blocks in size classes (the CPU backend's round up by at most
 *   1/8), so the sampling and the training phases' blocks are counted side by side, plus 1/4 for rounding and
 *   blocks one phase leaves that another cannot use.
 * Frozen base weights are counted in the dtype they are held in; everything trained is f32.
 */
export interface MemoryEstimate {
  readonly parameters: number;
  /** Parameters the optimizer updates: all of them, or the LoRA adapters'. */
  readonly trainableParameters: number;
  /** The model's weights as held (a frozen base in its dtype, adapters in f32). */
  readonly weights: number;
  /** Gradients of the trained parameters (f32) and AdamW's two moments. */
  readonly gradients: number;
  readonly adamMoments: number;
  /** An AdamW step's new parameters and moments, made before the old ones are freed: 0 when the step donates them. */
  readonly optimizerStep: number;
  /**
   * An RL step's starting trained parameters and moments, kept beside the running ones from its second AdamW update
   * on by a run that does not donate (it drops a non-finite step whole): 0 when it donates or updates once a step.
   */
  readonly stepStart: number;
  /**
   * A trained tied embedding's two gradients beside their sum, [vocab, dModel] each, until the backward's scope
   * closes. It is gone before the AdamW step, so the total counts the larger of this and `optimizerStep`.
   */
  readonly gradientSums: number;
  /** A full fine-tune's reference policy (KL or RCC): the weights RL started from, kept alive. */
  readonly reference: number;
  /** Activations of the widest forward + backward (an RL minibatch or a warm-start batch), logits included. */
  readonly activations: number;
  /** Sampling: the KV cache and the per-token [B, V] log-probs. */
  readonly sampling: number;
  /**
   * RoPE's cos and sin tables, [maxSeqLen, headDim / 2] each, sized by the config's positions, not the run's:
   * built on the host, then uploaded (counted twice).
   */
  readonly rope: number;
  /** The pools' size-class rounding and unusable free blocks (1/4 of the rest). */
  readonly allocator: number;
  readonly total: number;
  /** The largest single tensor (one buffer on a GPU). */
  readonly largestTensor: number;
}

/** LoRA as the estimate sees it: the rank and the adapted modules. */
export interface RunLora {
  readonly r: number;
  readonly targetModules: readonly LoraModule[];
}

export interface RunShape {
  /** Rows sampled per step (prompts x G, or the held-out evaluation's rows if more). */
  readonly sampledRows: number;
  /**
   * The distinct prompts among them (default sampledRows): a batch-invariant backend (not `rescores`) runs the
   * prompts' forward once per prompt and hands its cache to the prompt's rows.
   */
  readonly sampledPrompts?: number;
  /** Rows per optimisation minibatch (groups per minibatch x G). */
  readonly minibatchRows: number;
  /** Rows per warm-start step (worked solutions; 0 without a warm-start): its forward and backward too. */
  readonly warmStartRows?: number;
  /** Prompt tokens (the longest expected) and completion tokens. */
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly withReference: boolean;
  /** LoRA adapters on a frozen base (absent: full fine-tuning). */
  readonly lora?: RunLora | null;
  /** Bytes per frozen base parameter as held (default 4, f32; 2 for weights kept in bf16/f16). */
  readonly frozenBytesPerParameter?: number;
  /** Gradient checkpointing: one layer's activations at a time. */
  readonly remat?: boolean;
  /** pi_old is re-scored by a forward over the sampled batch (a backend whose results depend on the batch's shape). */
  readonly rescores?: boolean;
  /**
   * The trainer gives each AdamW step the parameters and moments before it (`adamwStep`'s `donate`), which updates
   * them in place: the step makes no copy of them. (At RL's first step a full fine-tune's parameters are shared
   * with the KL reference, so that step copies them: what `reference` counts.)
   */
  readonly donates?: boolean;
  /**
   * Rollouts an RL step updates on (prompts per step x G) and its epochs over them: with `minibatchRows`, the AdamW
   * updates a step makes (absent: one; a phase that makes no RL update, such as a warm-start before LoRA RL).
   */
  readonly stepRows?: number;
  readonly epochs?: number;
}

const F32 = 4;

const size = (shape: readonly number[] | undefined): number => (shape ? shape.reduce((a, d) => a * d, 1) : 0);

export function countParameters(config: TransformerConfig): number {
  const s = paramShapes(config);
  const perLayer = s.layers
    .map((l) => Object.values(l).reduce((a, shape) => a + size(shape), 0))
    .reduce((a, n) => a + n, 0);
  return size(s.embed.weight) + perLayer + size(s.finalNorm) + size(s.lmHead?.weight);
}

/** [out, in] of every adapted module of one layer. */
const adaptedShapes = (config: TransformerConfig, lora: RunLora): [number, number][] =>
  lora.targetModules.map((m) => moduleShape(config, m));

/** The adapters' parameters: r (in + out) per adapted module and layer. */
export function countLoraParameters(config: TransformerConfig, lora: RunLora): number {
  return config.nLayers * adaptedShapes(config, lora).reduce((a, [out, inp]) => a + lora.r * (out + inp), 0);
}

export function estimateTrainingMemory(config: TransformerConfig, run: RunShape): MemoryEstimate {
  const c = config;
  const dh = headDim(c);
  const q = c.nHeads * dh;
  const kv = c.nKvHeads * dh;
  const t = run.promptTokens + run.completionTokens;
  const parameters = countParameters(c);
  const lora = run.lora ?? null;
  const adapters = lora ? countLoraParameters(c, lora) : 0;
  const trainableParameters = lora ? adapters : parameters;
  const frozen = lora ? (run.frozenBytesPerParameter ?? F32) : F32;
  const weights = lora ? parameters * frozen + adapters * F32 : parameters * F32;
  const trained = trainableParameters * F32;
  // The widest forward and backward of the run: an RL minibatch or a warm-start batch.
  const rows = Math.max(run.minibatchRows, run.warmStartRows ?? 0);
  // What one layer's forward makes per token (norms and residual sums, projections, q/k norms, rotations, the
  // attention output and its row statistics, the MLP), held by the tape, and as much again for the backward.
  const forward =
    6 * c.dModel + 4 * q + 4 * kv + (c.qkNorm ? q + kv : 0) + (c.qkvBias ? q + 2 * kv : 0) + 3 * c.dFf + 2 * c.nHeads;
  // A LoRA module adds [N, r] twice and [N, out] once forward; [N, r] twice and [N, in] twice backward.
  const adapterPaths = lora
    ? adaptedShapes(c, lora).reduce((a, [out, inp]) => a + 2 * out + 2 * inp + 4 * lora.r, 0)
    : 0;
  const perLayer = 2 * forward + adapterPaths;
  const layers = run.remat ? c.nLayers * 2 * c.dModel + perLayer : c.nLayers * perLayer;
  const logits = rows * run.completionTokens * c.vocabSize * 3;
  const activations = (rows * t * layers + logits) * F32;
  // Sampling: the KV cache and each token's [B, V] log-probs; the prompts' forward and the sampled batch's forward
  // without a tape (the reference's log-probs, or pi_old re-scored) free each layer's intermediates as they go.
  const noGradForward = forward + adapterPaths / 2 + c.nLayers * 2 * c.dModel;
  const scored =
    run.withReference || run.rescores ? run.sampledRows * (t * noGradForward + run.completionTokens * c.vocabSize) : 0;
  // The prompts' forward (the cache's prefill) over every sampled row at once: the held-out evaluation's rows
  // (prompts x k, up to 100 prompts a batch) can outnumber a step's by far. A batch-invariant backend runs it once
  // per prompt, then gathers its last hidden state and its cache to the rows, and later copies the cache without
  // the finished rows: a second cache and the rows' last hidden states beside the first.
  const shared = !run.rescores;
  const prefill =
    (shared ? (run.sampledPrompts ?? run.sampledRows) : run.sampledRows) * run.promptTokens * noGradForward;
  const cache = run.sampledRows * c.nLayers * 2 * kv * t;
  const copies = shared ? cache + run.sampledRows * c.dModel : 0;
  const sampling = (cache + copies + 3 * run.sampledRows * c.vocabSize + Math.max(prefill, scored)) * F32;
  const reference = run.withReference && !lora ? parameters * F32 : 0;
  const ropeTable = c.maxSeqLen * (dh / 2) * F32;
  const rope = 2 * 2 * ropeTable;
  const largestTensor =
    Math.max(
      ropeTable / F32,
      c.vocabSize * c.dModel,
      rows * run.completionTokens * c.vocabSize,
      rows * c.nHeads * t * t,
    ) * F32;
  const optimizerStep = run.donates ? 0 : 3 * trained;
  const updates = (run.epochs ?? 1) * Math.ceil((run.stepRows ?? run.minibatchRows) / Math.max(1, run.minibatchRows));
  const stepStart = !run.donates && updates > 1 ? 3 * trained : 0;
  const gradientSums = !lora && c.tieEmbeddings !== false ? 2 * c.vocabSize * c.dModel * F32 : 0;
  const transient = Math.max(optimizerStep, gradientSums);
  const held = weights + trained + 2 * trained + transient + stepStart + reference + activations + sampling + rope;
  // The pools' rounding and the blocks one phase leaves that another's sizes cannot use: measured at up to 1.2x
  // the rest on the CPU backend over full and LoRA runs, with and without checkpointing (bench/RESULTS.md).
  const allocator = held / 4;
  return {
    parameters,
    trainableParameters,
    weights,
    gradients: trained,
    adamMoments: 2 * trained,
    optimizerStep,
    stepStart,
    gradientSums,
    reference,
    activations,
    sampling,
    rope,
    allocator,
    total: held + allocator,
    largestTensor,
  };
}

/**
 * A run whose phases train different parts (a new model's full warm-start, then LoRA RL on it): the pools keep the
 * first phase's blocks, whose sizes the second's mostly cannot use, so what each phase makes is counted side by side;
 * the weights once (the larger: the later phase's adapters on the same base), and the RoPE tables once.
 */
export function phasesInSequence(phases: readonly MemoryEstimate[]): MemoryEstimate {
  const sum = (f: (e: MemoryEstimate) => number): number => phases.reduce((a, e) => a + f(e), 0);
  const max = (f: (e: MemoryEstimate) => number): number => Math.max(...phases.map(f));
  const e = {
    parameters: max((e) => e.parameters),
    trainableParameters: max((e) => e.trainableParameters),
    weights: max((e) => e.weights),
    gradients: sum((e) => e.gradients),
    adamMoments: sum((e) => e.adamMoments),
    optimizerStep: sum((e) => e.optimizerStep),
    stepStart: sum((e) => e.stepStart),
    gradientSums: sum((e) => e.gradientSums),
    reference: sum((e) => e.reference),
    activations: sum((e) => e.activations),
    sampling: sum((e) => e.sampling),
    rope: max((e) => e.rope),
    largestTensor: max((e) => e.largestTensor),
  };
  const held =
    e.weights +
    e.gradients +
    e.adamMoments +
    sum((p) => Math.max(p.optimizerStep, p.gradientSums)) +
    e.stepStart +
    e.reference +
    e.activations +
    e.sampling +
    e.rope;
  return { ...e, allocator: held / 4, total: held + held / 4 };
}

const fmt = (bytes: number): string =>
  bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export function describeEstimate(e: MemoryEstimate): string {
  const trained =
    e.trainableParameters === e.parameters
      ? `${(e.parameters / 1e6).toFixed(2)}M parameters`
      : `${(e.parameters / 1e6).toFixed(2)}M parameters, ${(e.trainableParameters / 1e6).toFixed(2)}M trained`;
  return (
    `memory estimate: ${fmt(e.total)} = weights ${fmt(e.weights)} (${trained})` +
    ` + gradients ${fmt(e.gradients)} + AdamW moments ${fmt(e.adamMoments)}` +
    (e.gradientSums > e.optimizerStep
      ? ` + tied embedding's gradient sums ${fmt(e.gradientSums)}`
      : e.optimizerStep
        ? ` + AdamW step ${fmt(e.optimizerStep)}`
        : '') +
    (e.stepStart ? ` + RL step's starting state ${fmt(e.stepStart)}` : '') +
    `${e.reference ? ` + reference ${fmt(e.reference)}` : ''} + activations ${fmt(e.activations)}` +
    ` + sampling ${fmt(e.sampling)} + RoPE tables ${fmt(e.rope)} + allocator ${fmt(e.allocator)};` +
    ` largest tensor ${fmt(e.largestTensor)}`
  );
}

/** What the device can hold: total bytes, and the largest single buffer (a GPU binding limit). */
export interface MemoryLimits {
  readonly totalBytes: number;
  readonly maxBufferBytes?: number;
  /** Where `totalBytes` comes from, for the refusal ("the cpu backend's WebAssembly memory", "--memory-limit-gb"). */
  readonly source?: string;
}

export class MemoryError extends RlvrError {
  constructor(
    readonly estimate: MemoryEstimate,
    readonly limits: MemoryLimits,
    reason: string,
    /** Changes to the run that would fit, each with its estimate ("--lora-r 16 (1.10 GiB)"). */
    readonly alternatives: readonly string[] = [],
    /** The estimate's largest part, with the flag that shrinks it (the caller's words). */
    readonly largest: string | null = null,
  ) {
    const most = largest ? ` The largest part: ${largest}.` : '';
    // With the largest part named, what would fit was searched for: say when nothing was found.
    const none = largest ? ' Nothing smaller was found to fit.' : '';
    const fits = alternatives.length > 0 ? ` What would fit: ${alternatives.join('; ')}.` : none;
    super(`the run would not fit: ${reason}.${most}${fits} ${describeEstimate(estimate)}`);
  }
}

/** What a refusal says beside the sizes: what would fit, and the estimate's largest part. */
export interface FitAdvice {
  readonly fits: readonly string[];
  readonly largest?: string;
}

/** A size for a message: GiB, or MiB below one. */
export const formatBytes = fmt;

/** null when the estimate fits, else the error to refuse the run with (naming what would fit, when told). */
export function checkFits(
  e: MemoryEstimate,
  limits: MemoryLimits,
  advice: () => FitAdvice = () => ({ fits: [] }),
): MemoryError | null {
  if (e.total > limits.totalBytes) {
    const of = limits.source ? ` (${limits.source})` : '';
    const { fits, largest } = advice();
    return new MemoryError(
      e,
      limits,
      `${fmt(e.total)} needed, ${fmt(limits.totalBytes)} available${of}`,
      fits,
      largest ?? null,
    );
  }
  if (limits.maxBufferBytes !== undefined && e.largestTensor > limits.maxBufferBytes) {
    return new MemoryError(
      e,
      limits,
      `the largest tensor needs ${fmt(e.largestTensor)}, the device's largest buffer is ${fmt(limits.maxBufferBytes)}`,
    );
  }
  return null;
}
