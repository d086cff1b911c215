import { ShapeError } from '../core/errors.js';
import { Tensor } from '../core/tensor.js';
import { tensor } from './creation.js';
import { add, mul } from './elementwise.js';
import { matmul } from './matmul.js';
import { softmax } from './softmax.js';
import { allocArray } from '../core/dtype.js';

/** A large negative finite bias: exp of it underflows to 0, and unlike -Infinity it cannot make 0 * inf = NaN. */
const MASKED = -1e9;

/**
 * Additive causal mask [tq, tk] for queries that are the last `tq` of `tk` positions (tq < tk when a KV cache
 * holds the earlier keys): query i may attend to keys 0 .. i + (tk - tq).
 */
export function causalMask(tq: number, tk: number, like: Tensor): Tensor {
  const values = allocArray(like.dtype, tq * tk);
  const offset = tk - tq;
  for (let i = 0; i < tq; i++) for (let j = 0; j < tk; j++) values[i * tk + j] = j <= i + offset ? 0 : MASKED;
  return tensor(values, [tq, tk], { dtype: like.dtype, backend: like.backend });
}

/**
 * Causal scaled dot-product attention, a composite of matmul, softmax and masking.
 * q: [..., H, Tq, D], k and v: [..., H, Tk, D] -> [..., H, Tq, D]. `bias` (broadcast to [..., H, Tq, Tk]) is
 * added to the scores, e.g. to mask padding.
 */
export function causalAttention(q: Tensor, k: Tensor, v: Tensor, bias?: Tensor): Tensor {
  if (q.rank < 2 || k.rank !== q.rank || v.rank !== q.rank) throw new ShapeError('causalAttention', [q.shape, k.shape, v.shape], 'q, k, v must share a rank >= 2');
  const d = q.shape[q.rank - 1]!;
  const tq = q.shape[q.rank - 2]!;
  const tk = k.shape[k.rank - 2]!;
  if (k.shape[k.rank - 1] !== d || v.shape[v.rank - 2] !== tk) throw new ShapeError('causalAttention', [q.shape, k.shape, v.shape], 'head sizes or key lengths disagree');
  if (tq > tk) throw new ShapeError('causalAttention', [q.shape, k.shape], 'more queries than keys');
  let scores = add(mul(matmul(q, k, { transB: true }), 1 / Math.sqrt(d)), causalMask(tq, tk, q));
  if (bias) scores = add(scores, bias);
  return matmul(softmax(scores, -1), v);
}
