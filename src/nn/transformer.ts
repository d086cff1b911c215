import { computeDType, type DType } from '../core/dtype.js';
import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { getDefaultBackend } from '../core/runtime.js';
import type { Backend } from '../core/backend.js';
import type { Tensor } from '../core/tensor.js';
import { checkpoint, stopGradient } from '../core/transforms.js';
import { tidy } from '../core/scope.js';
import { causalAttention } from '../ops/attention.js';
import { ones, randn, tensor, zeros } from '../ops/creation.js';
import { add, equal, mul, where } from '../ops/elementwise.js';
import { gather } from '../ops/indexing.js';
import { matmul } from '../ops/matmul.js';
import { concat, reshape, updateSlice } from '../ops/movement.js';
import { swiglu } from '../ops/swiglu.js';
import { addRmsNorm, rmsNorm } from '../ops/norm.js';
import { rotaryPair } from '../ops/rope.js';
import { ropeAt, ropeTables } from './rope.js';
import type { LoraLayer, LoraPair, LoraWeights } from './adapters.js';
import { headDim, validateConfig, type TransformerConfig } from './config.js';
import { type LayerParams, type LoraModule, mapParameters } from './parameters.js';

// The config and the parameters' table are modules of their own; the model's importers find them here too.
export { type TransformerConfig, smallConfig, validateConfig, headDim } from './config.js';
export type { LayerParams } from './parameters.js';

/**
 * The parameter pytree. With tied embeddings (the default) the LM head is `embed.weight` transposed and has no
 * leaf of its own; an untied head is `lmHead.weight` [V, dModel].
 */
export type TransformerParams = {
  readonly embed: { readonly weight: Tensor };
  readonly layers: readonly LayerParams[];
  readonly finalNorm: Tensor;
  readonly lmHead?: { readonly weight: Tensor };
  /** LoRA adapters on some linear layers (`lora.ts`); absent, the model is the base model. */
  readonly lora?: LoraWeights;
};

export interface InitOptions {
  readonly dtype?: DType;
  readonly backend?: Backend;
  /** Standard deviation of the normal init of embeddings and linear weights (Hugging Face's initializer_range). */
  readonly std?: number;
}

/**
 * Seeded init, each parameter as its row of the tables says (`parameters.ts`): normal(0, std) for embeddings and
 * projections, with the residual-output projections (wo, wDown) scaled by 1/sqrt(2 nLayers) as in GPT-2 so the
 * residual stream does not grow with depth; norms start at 1, biases at 0. Drawn in the tables' order, where the
 * optional tensors come after the plain ones, so a plain config draws exactly as before.
 */
export function initParams(config: TransformerConfig, rng: Rng, opts: InitOptions = {}): TransformerParams {
  const c = validateConfig(config);
  const o = { dtype: opts.dtype ?? 'f32', backend: opts.backend ?? getDefaultBackend() };
  const std = opts.std ?? 0.02;
  const stds = { normal: std, residual: std / Math.sqrt(2 * c.nLayers) };
  return mapParameters(c, (p) => {
    const shape = p.shape(c);
    if (p.init === 'ones') return ones(shape, o);
    return p.init === 'zeros' ? zeros(shape, o) : randn(shape, rng, { ...o, std: stds[p.init] });
  });
}

/**
 * Keys and values of the positions seen so far, per layer: k and v are [B, rows, nKvHeads, headDim] (the
 * attention kernel's layout), keys already rotated by RoPE at their positions. With it, generating a token
 * costs one step of attention over the prefix instead of a forward over the whole sequence. Defined here, where
 * the forward reads and writes it; kv-cache.ts makes and disposes caches.
 *
 * Two kinds, one type:
 * - preallocated (`createKvCache`, `capacity` set): rows = capacity, of which the first `length` are filled.
 *   A forward writes its new positions in place (`updateSlice`, which consumes the old tensors: JAX's
 *   dynamic_update_slice with buffer donation), so a step copies O(new positions), never the whole cache, and
 *   allocates nothing new. Not differentiable (sampling only).
 * - growing (`cache: null` to start; `capacity` null): rows = length; a forward returns a longer copy (concat,
 *   differentiable) and the caller disposes the old one.
 *
 * Either way a forward with a cache returns the cache to use next: the one passed in must not be used again
 * (for a preallocated one its tensors are consumed; `disposeCache` on it is a harmless no-op).
 */
export type KvCache = {
  readonly layers: readonly { readonly k: Tensor; readonly v: Tensor }[];
  /**
   * The additive key bias [B, rows] (padding masks), or null when no position is masked (growing caches only: a
   * preallocated cache always has one, zeros where nothing is masked).
   */
  readonly keyBias: Tensor | null;
  readonly length: number;
  /** Rows allocated per layer (a preallocated cache), or null for a growing cache (rows = length). */
  readonly capacity: number | null;
};

export interface ForwardOptions {
  /**
   * Draws LoRA dropout masks (training forwards only; peft applies lora_dropout in train mode). Without it, or
   * with dropout 0, the adapters see their input as it is.
   */
  readonly dropoutRng?: Rng;
  /**
   * Gradient checkpointing (Hugging Face's `gradient_checkpointing`): each layer is `checkpoint`ed, so the backward
   * keeps one layer's input per layer and recomputes the rest, one layer at a time. Forwards without a cache only.
   */
  readonly remat?: boolean;
  /** Position of each new token [B, T] (i32), for RoPE; default 0..T-1 after the cache's length. */
  readonly positions?: Tensor;
  /**
   * Additive attention bias for the new tokens as keys, [B, T] in the parameters' dtype: 0 for real tokens and a
   * large negative number (PAD_BIAS) for padding. The cache remembers it for later steps.
   */
  readonly keyBias?: Tensor;
}

/**
 * The bias that masks a padding key: exp of it underflows to exactly 0, and it stays finite (no 0 * inf). It is
 * below `MASKED_KEY_BIAS`, so a padding query's attention output is 0, as PyTorch's sdpa gives it.
 */
export const PAD_BIAS = -1e9;

/**
 * The dtype the model computes in (activations, RoPE tables, key biases, caches): the embedding's, or f32 when the
 * embedding is a frozen bf16/f16 table.
 */
export const activationDType = (params: TransformerParams): DType => computeDType(params.embed.weight.dtype);

/** x [N, in] times a Hugging Face weight [out, in] (a frozen bf16/f16 one is widened inside the matmul kernel). */
const linear = (x: Tensor, w: Tensor): Tensor => matmul(x, w, { transB: true });

/**
 * The final hidden states [B, T, dModel] (after the last RMSNorm) for tokens [B, T] (i32), and the updated cache
 * when one is given (`null` starts a new one). Every op is row-wise in the positions, so a position's hidden
 * state does not depend on how many later positions are in the batch: the KV-cache path and the full forward
 * agree exactly on the CPU backend.
 */
export function hiddenStates(
  params: TransformerParams,
  config: TransformerConfig,
  tokens: Tensor,
  opts: ForwardOptions & { cache?: KvCache | null } = {},
): { hidden: Tensor; cache: KvCache | null } {
  if (tokens.dtype !== 'i32' || tokens.rank !== 2)
    throw new DTypeError('transformer', `tokens must be i32 [B, T], got ${tokens.dtype} [${tokens.shape.join(', ')}]`);
  const [b, t] = tokens.shape as [number, number];
  const cache = opts.cache ?? null;
  const past = cache?.length ?? 0;
  const capacity = cache?.capacity ?? null;
  const limit = capacity === null ? `maxSeqLen ${config.maxSeqLen}` : `the cache's capacity ${capacity}`;
  if (past + t > Math.min(config.maxSeqLen, capacity ?? Number.POSITIVE_INFINITY))
    throw new ShapeError('transformer', [tokens.shape], `${past} cached + ${t} new positions exceed ${limit}`);
  if (cache?.layers[0] && cache.layers[0].k.shape[0] !== b)
    throw new ShapeError('transformer', [tokens.shape, cache.layers[0].k.shape], 'the cache holds another batch');
  const dtype = activationDType(params);
  const backend = params.embed.weight.backend;
  const positions = opts.positions ?? defaultPositions(b, t, past, backend);
  const rope = ropeAt(ropeTables(headDim(config), config.maxSeqLen, config.ropeTheta, dtype, backend), positions);
  const keyBias =
    capacity === null
      ? extendBias(cache?.keyBias ?? null, opts.keyBias ?? null, b, t)
      : writeBias(cache!.keyBias!, opts.keyBias ?? null, past, b, t);
  const ctx: AttentionContext = { config, b, t, past, inPlace: capacity !== null, rope, bias: keyBias ?? undefined };
  const lora = params.lora ? { weights: params.lora, rng: opts.dropoutRng ?? null } : null;

  let x = gather(params.embed.weight, tokens, 0);
  if (config.padTokenId !== undefined) {
    x = where(reshape(equal(tokens, config.padTokenId), [b, t, 1]), stopGradient(x), x);
  }
  if (opts.remat) {
    if (opts.cache !== undefined)
      throw new ArgumentError('transformer', 'gradient checkpointing (remat) is for forwards without a KV cache');
    return { hidden: rematLayers(params, x, ctx, lora), cache: null };
  }
  // Each residual add is fused with the RMSNorm that follows it (the next block's, or the final one).
  let h = rmsNorm(x, params.layers[0]?.attnNorm ?? params.finalNorm, config.rmsEps);
  const layers: { k: Tensor; v: Tensor }[] = [];
  params.layers.forEach((p, l) => {
    // One scope per layer: a forward without a tape (sampling, scoring a reference) frees each layer's
    // intermediates as it goes; under a tape nothing changes (the tape holds what its rules need).
    const out = tidy(() => {
      const a = block(p, x, h, ctx, cache?.layers[l], lora ? adapterOf(lora, l) : null);
      const next = params.layers[l + 1]?.attnNorm ?? params.finalNorm;
      const end = addRmsNorm(a.sum, a.mlp, next, config.rmsEps);
      return { x: end.sum, h: end.normed, k: a.k, v: a.v };
    });
    layers.push({ k: out.k, v: out.v });
    x = out.x;
    h = out.h;
  });
  const hidden = h;
  return { hidden, cache: opts.cache !== undefined ? { layers, keyBias, length: past + t, capacity } : null };
}

/**
 * The layers under gradient checkpointing: each one a pure function of its input, its weights, its adapters and
 * the step's RoPE tables and key bias, so its backward can recompute it. A layer ends with the residual sum; the
 * next one starts with its own RMSNorm (unfused, unlike the plain path's addRmsNorm across layers). LoRA dropout
 * draws from a generator seeded per layer, so the recomputation draws the same masks.
 */
function rematLayers(
  params: TransformerParams,
  embedded: Tensor,
  ctx: AttentionContext,
  lora: { weights: LoraWeights; rng: Rng | null } | null,
): Tensor {
  const { config } = ctx;
  let x = embedded;
  params.layers.forEach((p, l) => {
    const adapters = lora ? adapterOf(lora, l) : null;
    const seed = adapters?.rng && adapters.dropout > 0 ? adapters.rng.nextU32() : null;
    const layer = (a: { x: Tensor; p: LayerParams; lora: LoraLayer | null; rope: typeof ctx.rope; bias?: Tensor }) => {
      const layerCtx: AttentionContext = { ...ctx, rope: a.rope, bias: a.bias };
      const ad = adapters && a.lora ? { ...adapters, layer: a.lora, rng: seed === null ? null : new Rng(seed) } : null;
      const out = block(a.p, a.x, rmsNorm(a.x, a.p.attnNorm, config.rmsEps), layerCtx, undefined, ad);
      return add(out.sum, out.mlp);
    };
    x = checkpoint(layer)({
      x,
      p,
      lora: adapters?.layer ?? null,
      rope: ctx.rope,
      ...(ctx.bias ? { bias: ctx.bias } : {}),
    });
  });
  return rmsNorm(x, params.finalNorm, config.rmsEps);
}

/**
 * One block up to its MLP's output: attention of the normed input h [B, T, D] (keys and values with `cached`'s),
 * the residual sum x + attention and its RMSNorm (fused), and the MLP of that. The caller adds the MLP's output to
 * `sum`, fused with the next norm (the plain path) or not (under `checkpoint`).
 */
function block(
  p: LayerParams,
  x: Tensor,
  h: Tensor,
  ctx: AttentionContext,
  cached: { k: Tensor; v: Tensor } | undefined,
  lora: LayerAdapters | null,
): { sum: Tensor; mlp: Tensor; k: Tensor; v: Tensor } {
  const { config, b, t } = ctx;
  const a = attention(p, reshape(h, [b * t, config.dModel]), ctx, cached, lora);
  const mid = addRmsNorm(x, reshape(a.out, [b, t, config.dModel]), p.mlpNorm, config.rmsEps);
  const mlp = reshape(swiGlu(p, reshape(mid.normed, [b * t, config.dModel]), lora), [b, t, config.dModel]);
  return { sum: mid.sum, mlp, k: a.k, v: a.v };
}

interface AttentionContext {
  readonly config: TransformerConfig;
  readonly b: number;
  readonly t: number;
  /** Positions already in the cache. */
  readonly past: number;
  /** A preallocated cache: the new keys/values are written into it (consuming it) instead of concatenated. */
  readonly inPlace: boolean;
  /** cos/sin [B, T, 1, dh/2] of the new positions. */
  readonly rope: { readonly cos: Tensor; readonly sin: Tensor };
  /** The key bias [B, rows] over all keys (cached and new); undefined when nothing is masked. */
  readonly bias: Tensor | undefined;
}

/** Attention of normed inputs h [B*T, D]: the output [B*T, D] before the residual, and this layer's keys/values. */
function attention(
  p: LayerParams,
  h: Tensor,
  ctx: AttentionContext,
  cached: { k: Tensor; v: Tensor } | undefined,
  lora: LayerAdapters | null,
): { out: Tensor; k: Tensor; v: Tensor } {
  const { config, b, t, rope } = ctx;
  const dh = headDim(config);
  // Keys/values are kept as [B, T, Hkv, dh] (flash-attn's layout: no permutes); cached ones were rotated at
  // their own positions. Grouped-query heads are resolved inside the attention kernel (no repeat_kv copy).
  // Qwen2's q/k/v biases and Qwen3's per-head q/k norms come before the rotation, as in transformers.
  const qk = rotaryPair(
    headNorm(reshape(project(h, p.wq, p.bq, lora, 'q_proj'), [b, t, config.nHeads, dh]), p.qNorm, config),
    headNorm(reshape(project(h, p.wk, p.bk, lora, 'k_proj'), [b, t, config.nKvHeads, dh]), p.kNorm, config),
    rope.cos,
    rope.sin,
  );
  const q = qk[0];
  let k = qk[1];
  let v = reshape(project(h, p.wv, p.bv, lora, 'v_proj'), [b, t, config.nKvHeads, dh]);
  if (cached && ctx.inPlace) {
    k = updateSlice(cached.k, k, [0, ctx.past, 0, 0]);
    v = updateSlice(cached.v, v, [0, ctx.past, 0, 0]);
  } else if (cached) {
    k = concat([cached.k, k], 1);
    v = concat([cached.v, v], 1);
  }
  // Only the first past + t rows of a preallocated cache are keys.
  const attn = causalAttention(q, k, v, { keyLength: ctx.past + t, ...(ctx.bias ? { keyBias: ctx.bias } : {}) });
  const merged = reshape(attn, [b * t, config.nHeads * dh]);
  return { out: project(merged, p.wo, undefined, lora, 'o_proj'), k, v };
}

/** A layer's adapters with what every adapted module shares (scaling, dropout and its generator). */
interface LayerAdapters {
  readonly layer: LoraLayer;
  readonly scaling: number;
  readonly dropout: number;
  readonly rng: Rng | null;
}

function adapterOf(lora: { weights: LoraWeights; rng: Rng | null }, l: number): LayerAdapters | null {
  const layer = lora.weights.layers[l];
  if (!layer) return null;
  return { layer, scaling: lora.weights.scaling, dropout: lora.weights.dropout, rng: lora.rng };
}

/**
 * A projection with an optional bias (Qwen2's q/k/v) and an optional LoRA adapter: base(x) + scaling * B A drop(x),
 * in that order, as peft's LoraLayer.forward adds it to the base layer's output (bias included).
 */
function project(
  h: Tensor,
  w: Tensor,
  bias: Tensor | undefined,
  lora: LayerAdapters | null,
  module: LoraModule,
): Tensor {
  const base = bias ? add(linear(h, w), bias) : linear(h, w);
  const pair = lora?.layer[module];
  return pair ? add(base, loraPath(h, pair, lora!)) : base;
}

/**
 * scaling * B (A drop(x)) for x [N, in]: [N, r], scaled there (r is small: one [N, out] temporary fewer than
 * scaling the result, as peft does), then [N, out].
 */
function loraPath(x: Tensor, pair: LoraPair, lora: LayerAdapters): Tensor {
  const input = lora.rng && lora.dropout > 0 ? dropoutOf(x, lora.dropout, lora.rng) : x;
  return linear(mul(linear(input, pair.a), lora.scaling), pair.b);
}

/** Inverted dropout (torch.nn.Dropout in train mode): each entry kept with 1 - p and scaled by 1 / (1 - p). */
function dropoutOf(x: Tensor, p: number, rng: Rng): Tensor {
  const mask = new Float32Array(x.size);
  const keep = 1 / (1 - p);
  for (let i = 0; i < mask.length; i++) mask[i] = rng.uniform() < p ? 0 : keep;
  return mul(x, tensor(mask, x.shape, { dtype: x.dtype, backend: x.backend }));
}

/** Qwen3's RMSNorm over each head [B, T, H, dh] (before RoPE), when the layer has one. */
const headNorm = (x: Tensor, gain: Tensor | undefined, config: TransformerConfig): Tensor =>
  gain ? rmsNorm(x, gain, config.rmsEps) : x;

/** SwiGLU: down(silu(gate(h)) * up(h)), the gate product one fused kernel. */
const swiGlu = (p: LayerParams, h: Tensor, lora: LayerAdapters | null): Tensor => {
  const gated = swiglu(
    project(h, p.wGate, undefined, lora, 'gate_proj'),
    project(h, p.wUp, undefined, lora, 'up_proj'),
  );
  return project(gated, p.wDown, undefined, lora, 'down_proj');
};

/**
 * The key bias over all keys: the cached one followed by the new tokens' (zeros when only the cache has one).
 * A view of the caller's tensor (not its handle) goes into the cache, so disposing the cache leaves it alone.
 */
function extendBias(prev: Tensor | null, next: Tensor | null, b: number, t: number): Tensor | null {
  if (!prev) return next ? stopGradient(next) : null;
  return concat([prev, next ?? zeros([b, t], { dtype: prev.dtype, backend: prev.backend })], 1);
}

/** A preallocated cache's key bias [B, capacity] with the new tokens' (zeros when none) written at `past`. */
function writeBias(prev: Tensor, next: Tensor | null, past: number, b: number, t: number): Tensor {
  return updateSlice(prev, next ?? zeros([b, t], { dtype: prev.dtype, backend: prev.backend }), [0, past]);
}

/** Logits [..., V] of hidden states [..., dModel] under the LM head (embed^T when tied). */
export function lmHead(params: TransformerParams, hidden: Tensor): Tensor {
  const d = hidden.shape[hidden.rank - 1]!;
  const lead = hidden.shape.slice(0, -1);
  const flat = reshape(hidden, [lead.reduce((a, n) => a * n, 1), d]);
  const head = params.lmHead?.weight ?? params.embed.weight;
  return reshape(linear(flat, head), [...lead, head.shape[0]!]);
}

/** Logits [B, T, V] of tokens [B, T] (a full forward, no cache). */
export function forward(
  params: TransformerParams,
  config: TransformerConfig,
  tokens: Tensor,
  opts: ForwardOptions = {},
): Tensor {
  return lmHead(params, hiddenStates(params, config, tokens, opts).hidden);
}

/**
 * Logits [B, T, V] of new tokens given a cache of earlier ones (`null` to start a growing one, or
 * `createKvCache(...)` for a preallocated one), and the cache to use next (the one passed in is spent).
 */
export function forwardWithCache(
  params: TransformerParams,
  config: TransformerConfig,
  tokens: Tensor,
  cache: KvCache | null,
  opts: ForwardOptions = {},
): { logits: Tensor; cache: KvCache } {
  const { hidden, cache: next } = hiddenStates(params, config, tokens, { ...opts, cache });
  return { logits: lmHead(params, hidden), cache: next! };
}

function defaultPositions(b: number, t: number, past: number, backend: Backend): Tensor {
  const values = new Int32Array(b * t);
  for (let i = 0; i < b; i++) for (let j = 0; j < t; j++) values[i * t + j] = past + j;
  return tensor(values, [b, t], { dtype: 'i32', backend });
}
