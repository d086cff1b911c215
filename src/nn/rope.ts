import type { Backend } from '../core/backend.js';
import { allocArray, computeDType, type DType } from '../core/dtype.js';
import { ArgumentError } from '../core/errors.js';
import { keep } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { gather } from '../ops/indexing.js';
import { reshape } from '../ops/movement.js';
import { rotary } from '../ops/rope.js';

/**
 * Rotary position embeddings in the Llama/Hugging Face layout ("rotate half"): the head dimension is split into
 * halves (x1, x2) and pair i = (x1[i], x2[i]) is rotated by angle pos * theta^(-2i/d). Real Llama/Qwen
 * checkpoints expect exactly this pairing (not the interleaved one of the original paper).
 */
export interface RopeTables {
  /** cos and sin of pos * invFreq, [maxSeqLen, headDim / 2]. */
  readonly cos: Tensor;
  readonly sin: Tensor;
}

// Tables are constant per (backend, sizes, dtype); they are built once and kept outside every tidy scope.
const cache = new WeakMap<Backend, Map<string, RopeTables>>();

export function ropeTables(
  headDim: number,
  maxSeqLen: number,
  theta: number,
  dtype: DType,
  backend: Backend,
): RopeTables {
  if (headDim % 2 !== 0) throw new ArgumentError('rope', `head dimension must be even, got ${headDim}`);
  const key = `${headDim}|${maxSeqLen}|${theta}|${dtype}`;
  let perBackend = cache.get(backend);
  if (!perBackend) {
    perBackend = new Map();
    cache.set(backend, perBackend);
  }
  const hit = perBackend.get(key);
  if (hit && !hit.cos.isDisposed && !hit.sin.isDisposed) return hit;
  const half = headDim / 2;
  const cos = allocArray(computeDType(dtype), maxSeqLen * half);
  const sin = allocArray(computeDType(dtype), maxSeqLen * half);
  for (let p = 0; p < maxSeqLen; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * theta ** ((-2 * i) / headDim);
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  const tables = keep({
    cos: tensor(cos, [maxSeqLen, half], { dtype, backend }),
    sin: tensor(sin, [maxSeqLen, half], { dtype, backend }),
  });
  perBackend.set(key, tables);
  return tables;
}

/** cos and sin rows for `positions` [B, T] (i32), shaped [B, T, 1, headDim/2] to broadcast over heads. */
export function ropeAt(tables: RopeTables, positions: Tensor): { cos: Tensor; sin: Tensor } {
  const [b, t] = positions.shape as [number, number];
  const half = tables.cos.shape[1]!;
  return {
    cos: reshape(gather(tables.cos, positions, 0), [b, t, 1, half]),
    sin: reshape(gather(tables.sin, positions, 0), [b, t, 1, half]),
  };
}

/**
 * Rotate x [B, T, H, headDim] by the angles in cos/sin [B, T, 1, headDim/2]: (x1 c - x2 s, x2 c + x1 s), one
 * fused kernel (`rotary`) forward and one backward.
 */
export const applyRope = (x: Tensor, cos: Tensor, sin: Tensor): Tensor => rotary(x, cos, sin);
