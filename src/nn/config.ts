import { ArgumentError } from '../core/errors.js';

/**
 * A decoder-only transformer in the Llama/Qwen layout: token embeddings, pre-norm blocks of RMSNorm -> causal
 * multi-head attention with RoPE (grouped-query when nKvHeads < nHeads) -> residual, RMSNorm -> SwiGLU MLP ->
 * residual, a final RMSNorm and an LM head (tied to the embeddings by default). Linear weights are stored as
 * Hugging Face stores them, [out, in] (every parameter's shape is in `parameters.ts`), so checkpoints map one to
 * one (`io/hf.ts`); products use `matmul(x, W, { transB })`. The optional fields cover Qwen2 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm,
 * head_dim independent of hidden / heads); left out, the model and its parameter pytree are plain Llama.
 */
export interface TransformerConfig {
  readonly vocabSize: number;
  readonly dModel: number;
  readonly nLayers: number;
  readonly nHeads: number;
  /** Key/value heads; nHeads must be a multiple (grouped-query attention). Equal to nHeads for plain MHA. */
  readonly nKvHeads: number;
  /** Hidden size of the SwiGLU MLP. */
  readonly dFf: number;
  /** Longest sequence (prompt + completion) the RoPE tables cover. */
  readonly maxSeqLen: number;
  readonly ropeTheta: number;
  readonly rmsEps: number;
  /** Size of one attention head; default dModel / nHeads (Qwen3-0.6B: 128 with dModel 1024 and 16 heads). */
  readonly headDim?: number;
  /** Biases on the q, k and v projections (Qwen2); default false. */
  readonly qkvBias?: boolean;
  /** RMSNorm over each query and key head before RoPE (Qwen3's q_norm / k_norm); default false. */
  readonly qkNorm?: boolean;
  /** The LM head is the embedding matrix (default true) or a weight of its own, `lmHead.weight` [V, dModel]. */
  readonly tieEmbeddings?: boolean;
  /**
   * The padding token, whose embedding row gets no gradient from lookups (PyTorch's nn.Embedding padding_idx,
   * which Llama/Qwen set from pad_token_id); the tied LM head still trains it. Default: none.
   */
  readonly padTokenId?: number;
}

/** A small default for the built-in tasks: fast enough to train on a 2-core CPU in minutes. */
export function smallConfig(vocabSize: number, overrides: Partial<TransformerConfig> = {}): TransformerConfig {
  return {
    vocabSize,
    dModel: 64,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 4,
    dFf: 192,
    maxSeqLen: 48,
    ropeTheta: 10_000,
    rmsEps: 1e-6,
    ...overrides,
  };
}

export function validateConfig(c: TransformerConfig): TransformerConfig {
  const ints = ['vocabSize', 'dModel', 'nLayers', 'nHeads', 'nKvHeads', 'dFf', 'maxSeqLen'] as const;
  for (const k of ints)
    if (!Number.isInteger(c[k]) || c[k] < 1)
      throw new ArgumentError('TransformerConfig', `${k} must be a positive integer, got ${c[k]}`);
  const bad = (why: string): never => {
    throw new ArgumentError('TransformerConfig', why);
  };
  if (c.headDim === undefined && c.dModel % c.nHeads !== 0) {
    bad(`dModel ${c.dModel} is not a multiple of nHeads ${c.nHeads} (give headDim)`);
  }
  if (c.headDim !== undefined && !(Number.isInteger(c.headDim) && c.headDim >= 1)) {
    bad(`headDim must be a positive integer, got ${c.headDim}`);
  }
  if (headDim(c) % 2 !== 0) bad(`the head dimension ${headDim(c)} must be even for RoPE`);
  if (c.nHeads % c.nKvHeads !== 0)
    throw new ArgumentError('TransformerConfig', `nHeads ${c.nHeads} is not a multiple of nKvHeads ${c.nKvHeads}`);
  const pad = c.padTokenId;
  if (pad !== undefined && !(Number.isInteger(pad) && pad >= 0 && pad < c.vocabSize)) {
    bad(`padTokenId ${pad} is not an id of the vocabulary`);
  }
  if (!(c.ropeTheta > 0) || !(c.rmsEps > 0))
    throw new ArgumentError('TransformerConfig', 'ropeTheta and rmsEps must be positive');
  return c;
}

export const headDim = (c: TransformerConfig): number => c.headDim ?? c.dModel / c.nHeads;
