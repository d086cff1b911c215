import { ArgumentError, DTypeError, NotDifferentiableError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { kt, runBackward, runOp } from './op.js';

export interface AttentionOptions {
  /** Additive bias per key [B, Tk] (0 for real tokens, a large negative finite number for padding). */
  readonly keyBias?: Tensor;
  /** Multiplies q.k; default 1 / sqrt(D). */
  readonly scale?: number;
  /**
   * How many of k's Tk rows are keys (default Tk): a preallocated KV cache of capacity Tk filled up to keyLength.
   * Rows from keyLength on (and their bias) are never read. Forward only: the gradient needs keyLength = Tk.
   */
  readonly keyLength?: number;
}

/**
 * Causal scaled dot-product attention as one fused primitive (flash-style: the [Tq, Tk] scores are never
 * stored; the backward recomputes them). The layout is flash-attn's: q [B, Tq, Hq, D], k and v [B, Tk, Hkv, D]
 * with Hq a multiple of Hkv (grouped-query attention: query head h reads key/value head floor(h / (Hq / Hkv)),
 * Hugging Face's repeat_kv without the copy) -> [B, Tq, Hq, D]. The queries are the last Tq of L = keyLength
 * (default Tk) positions (Tq < L when a KV cache holds the earlier keys): query i sees keys 0 .. i + L - Tq. A key whose bias is at
 * or below `MASKED_KEY_BIAS` (-5e8; the policy's padding bias is -1e9) is masked, and a query whose own key is
 * masked outputs 0 and passes no gradient, as PyTorch's sdpa does for a left-padded row's padding queries (whose
 * visible keys are all padding). Never NaN.
 * Differentiable in q, k and v (once); the key bias is a constant (watching it throws).
 */
export function causalAttention(q: Tensor, k: Tensor, v: Tensor, opts: AttentionOptions = {}): Tensor {
  const shapes = [q.shape, k.shape, v.shape];
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4)
    throw new ShapeError('causalAttention', shapes, 'q, k, v must be [B, T, H, D]');
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  const [bk, tk, hkv, dk] = k.shape as [number, number, number, number];
  if (bk !== b || dk !== d || v.shape.some((n, i) => n !== k.shape[i]))
    throw new ShapeError('causalAttention', shapes, 'k and v must be [B, Tk, Hkv, D] like q');
  if (hq % hkv !== 0)
    throw new ShapeError('causalAttention', shapes, `${hq} query heads are not a multiple of ${hkv} key/value heads`);
  const keyLength = opts.keyLength ?? tk;
  if (!Number.isInteger(keyLength) || keyLength > tk)
    throw new ArgumentError('causalAttention', `keyLength must be an integer <= ${tk} key rows, got ${keyLength}`);
  if (tq > keyLength) throw new ShapeError('causalAttention', shapes, `${tq} queries but ${keyLength} keys`);
  if (k.dtype !== q.dtype || v.dtype !== q.dtype)
    throw new DTypeError('causalAttention', `q, k, v dtypes differ: ${q.dtype}, ${k.dtype}, ${v.dtype}`);
  const bias = opts.keyBias;
  if (bias && (bias.rank !== 2 || bias.shape[0] !== b || bias.shape[1] !== tk))
    throw new ShapeError('causalAttention', [...shapes, bias.shape], `keyBias must be [${b}, ${tk}]`);
  if (bias && bias.dtype !== q.dtype)
    throw new DTypeError('causalAttention', `keyBias must be ${q.dtype}, got ${bias.dtype}`);
  const scale = opts.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new ArgumentError('causalAttention', `scale must be finite, got ${scale}`);
  const op = 'causalAttention';
  const inputs = bias ? [q, k, v, bias] : [q, k, v];
  const biasKt = bias ? kt(op, bias) : null;
  return runOp(
    op,
    inputs,
    q.shape,
    q.dtype,
    (kern) => kern.attention(kt(op, q), kt(op, k), kt(op, v), biasKt, scale, keyLength),
    (y) => (g, needs) => {
      if (needs[3]) throw new ArgumentError(op, 'the key bias is a constant: its gradient is not computed');
      if (keyLength !== tk)
        throw new NotDifferentiableError(`${op} with keyLength ${keyLength} < ${tk} key rows (a preallocated cache)`);
      const back = 'causalAttentionBackward';
      const biasOf = bias ? kt(back, bias) : null;
      return runBackward(back, [q, k, v, y, g], [q, k, v], (kern) =>
        kern.attentionBackward(kt(back, q), kt(back, k), kt(back, v), biasOf, kt(back, y), kt(back, g), scale),
      );
    },
  );
}
