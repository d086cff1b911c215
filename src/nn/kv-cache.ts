import type { Tensor } from '../core/tensor.js';
import { ArgumentError } from '../core/errors.js';
import { dispose } from '../core/scope.js';
import { zeros } from '../ops/creation.js';
import { headDim, type TransformerConfig, type TransformerParams } from './transformer.js';

/**
 * Keys and values of the positions seen so far, per layer: k and v are [B, rows, nKvHeads, headDim] (the
 * attention kernel's layout), keys already rotated by RoPE at their positions. With it, generating a token
 * costs one step of attention over the prefix instead of a forward over the whole sequence.
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

/**
 * An empty preallocated cache for `batch` rows and up to `capacity` positions (prompt width + new tokens), in
 * the parameters' dtype and backend.
 */
export function createKvCache(
  params: TransformerParams,
  config: TransformerConfig,
  batch: number,
  capacity: number,
): KvCache {
  if (!Number.isInteger(batch) || batch < 1 || !Number.isInteger(capacity) || capacity < 1)
    throw new ArgumentError('createKvCache', `need integer batch >= 1 and capacity >= 1, got ${batch}, ${capacity}`);
  if (capacity > config.maxSeqLen)
    throw new ArgumentError('createKvCache', `capacity ${capacity} exceeds maxSeqLen ${config.maxSeqLen}`);
  const o = { dtype: params.embed.weight.dtype, backend: params.embed.weight.backend };
  const shape = [batch, capacity, config.nKvHeads, headDim(config)];
  const layers = params.layers.map(() => ({ k: zeros(shape, o), v: zeros(shape, o) }));
  return { layers, keyBias: zeros([batch, capacity], o), length: 0, capacity };
}

export function disposeCache(cache: KvCache | null): void {
  if (cache) dispose(cache);
}
