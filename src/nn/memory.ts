import { RlvrError } from '../core/errors.js';
import { paramShapes } from './hf.js';
import { headDim, type TransformerConfig } from './transformer.js';

/**
 * A training run's memory, estimated from the config before anything is allocated, so a run that cannot fit is
 * refused at the start instead of failing midway. f32 throughout (4 bytes). It is an estimate: activations count
 * the tensors the backward pass keeps per token and layer (norm inputs, q/k/v before and after RoPE, attention
 * probabilities, the MLP's gate/up/product), not every transient.
 */
export interface MemoryEstimate {
  readonly parameters: number;
  readonly weights: number;
  /** Gradients (one f32 per parameter) and AdamW's two moments. */
  readonly gradients: number;
  readonly adamMoments: number;
  /** A frozen reference policy held beside the trained one (KL or RCC). */
  readonly reference: number;
  /** Saved activations of one minibatch forward + backward, the LM head's logits included. */
  readonly activations: number;
  /** Sampling: the KV cache and the per-token [B, V] log-probs. */
  readonly sampling: number;
  /**
   * RoPE's cos and sin tables, [maxSeqLen, headDim / 2] each, sized by the config's positions, not the run's:
   * built on the host, then uploaded (counted twice).
   */
  readonly rope: number;
  readonly total: number;
  /** The largest single tensor (one buffer on a GPU). */
  readonly largestTensor: number;
}

export interface RunShape {
  /** Rows sampled per step (prompts x G). */
  readonly sampledRows: number;
  /** Rows per optimisation minibatch (groups per minibatch x G). */
  readonly minibatchRows: number;
  /** Rows per warm-start step (worked solutions; 0 without a warm-start): its forward and backward too. */
  readonly warmStartRows?: number;
  /** Prompt tokens (the longest expected) and completion tokens. */
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly withReference: boolean;
}

const F32 = 4;

export function countParameters(config: TransformerConfig): number {
  const s = paramShapes(config);
  const size = (shape: readonly number[] | undefined): number => (shape ? shape.reduce((a, d) => a * d, 1) : 0);
  const perLayer = s.layers
    .map((l) => Object.values(l).reduce((a, shape) => a + size(shape), 0))
    .reduce((a, n) => a + n, 0);
  return size(s.embed.weight) + perLayer + size(s.finalNorm) + size(s.lmHead?.weight);
}

export function estimateTrainingMemory(config: TransformerConfig, run: RunShape): MemoryEstimate {
  const c = config;
  const dh = headDim(c);
  const t = run.promptTokens + run.completionTokens;
  const parameters = countParameters(c);
  const weights = parameters * F32;
  // The widest forward and backward of the run: an RL minibatch or a warm-start batch.
  const rows = Math.max(run.minibatchRows, run.warmStartRows ?? 0);
  const perTokenLayer = 8 * c.dModel + 6 * c.nHeads * dh + 4 * c.nKvHeads * dh + 2 * c.nHeads * t + 5 * c.dFf;
  const logits = rows * run.completionTokens * c.vocabSize * 3;
  const activations = (rows * t * c.nLayers * perTokenLayer + logits) * F32;
  const sampling = (run.sampledRows * c.nLayers * 2 * c.nKvHeads * t * dh + 3 * run.sampledRows * c.vocabSize) * F32;
  const reference = run.withReference ? weights : 0;
  const ropeTable = c.maxSeqLen * (dh / 2) * F32;
  const rope = 2 * 2 * ropeTable;
  const largestTensor =
    Math.max(
      ropeTable / F32,
      c.vocabSize * c.dModel,
      rows * run.completionTokens * c.vocabSize,
      rows * c.nHeads * t * t,
    ) * F32;
  const total = weights + weights + 2 * weights + reference + activations + sampling + rope;
  return {
    parameters,
    weights,
    gradients: weights,
    adamMoments: 2 * weights,
    reference,
    activations,
    sampling,
    rope,
    total,
    largestTensor,
  };
}

const fmt = (bytes: number): string =>
  bytes >= 2 ** 30 ? `${(bytes / 2 ** 30).toFixed(2)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export function describeEstimate(e: MemoryEstimate): string {
  return (
    `memory estimate: ${fmt(e.total)} = weights ${fmt(e.weights)} (${(e.parameters / 1e6).toFixed(2)}M parameters)` +
    ` + gradients ${fmt(e.gradients)} + AdamW moments ${fmt(e.adamMoments)}` +
    `${e.reference ? ` + reference ${fmt(e.reference)}` : ''} + activations ${fmt(e.activations)}` +
    ` + sampling ${fmt(e.sampling)} + RoPE tables ${fmt(e.rope)}; largest tensor ${fmt(e.largestTensor)}`
  );
}

/** What the device can hold: total bytes, and the largest single buffer (a GPU binding limit). */
export interface MemoryLimits {
  readonly totalBytes: number;
  readonly maxBufferBytes?: number;
}

export class MemoryError extends RlvrError {
  constructor(
    readonly estimate: MemoryEstimate,
    readonly limits: MemoryLimits,
    reason: string,
  ) {
    super(`the run would not fit: ${reason}. ${describeEstimate(estimate)}`);
  }
}

/** null when the estimate fits, else the error to refuse the run with. */
export function checkFits(e: MemoryEstimate, limits: MemoryLimits): MemoryError | null {
  if (e.total > limits.totalBytes)
    return new MemoryError(e, limits, `${fmt(e.total)} needed, ${fmt(limits.totalBytes)} available`);
  if (limits.maxBufferBytes !== undefined && e.largestTensor > limits.maxBufferBytes) {
    return new MemoryError(
      e,
      limits,
      `the largest tensor needs ${fmt(e.largestTensor)}, the device's largest buffer is ${fmt(limits.maxBufferBytes)}`,
    );
  }
  return null;
}
