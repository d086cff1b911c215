import { ArgumentError } from '../core/errors.js';
import { dispose } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { zeros } from '../ops/creation.js';
import { gather } from '../ops/indexing.js';
import {
  activationDType,
  headDim,
  type KvCache,
  type TransformerConfig,
  type TransformerParams,
} from './transformer.js';

/** Making and disposing KV caches; their type, `KvCache`, is the transformer forward's (transformer.ts). */
export type { KvCache };

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
  const o = { dtype: activationDType(params), backend: params.embed.weight.backend };
  const shape = [batch, capacity, config.nKvHeads, headDim(config)];
  const layers = params.layers.map(() => ({ k: zeros(shape, o), v: zeros(shape, o) }));
  return { layers, keyBias: zeros([batch, capacity], o), length: 0, capacity };
}

export function disposeCache(cache: KvCache | null): void {
  if (cache) dispose(cache);
}

/**
 * A cache whose row r is row `rows[r]` of `cache` (`rows`: i32 [B']): one prompt's cache handed to each of its G
 * completions. The cache passed in is not consumed.
 */
export function repeatCacheRows(cache: KvCache, rows: Tensor): KvCache {
  return {
    layers: cache.layers.map(({ k, v }) => ({ k: gather(k, rows), v: gather(v, rows) })),
    keyBias: cache.keyBias && gather(cache.keyBias, rows),
    length: cache.length,
    capacity: cache.capacity,
  };
}
