import { DTypeError, ShapeError } from '../core/errors.js';
import { broadcastShapes } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { unbroadcast } from './broadcast.js';
import { cast } from './elementwise.js';
import { isHalf, promote, type WideDType } from '../core/dtype.js';
import { reshape, squeeze, transpose } from './movement.js';
import { kt, runOp } from './op.js';
import { absorbed } from '../core/tape.js';
import { shapesEqual } from '../core/shape.js';

export interface MatmulOptions {
  /** Use a's last two axes transposed. */
  readonly transA?: boolean;
  readonly transB?: boolean;
}

/**
 * Batched matrix product with NumPy semantics: [..., M, K] @ [..., K, N] -> [..., M, N], batch dims broadcast,
 * a 1-D operand is promoted to a matrix and its axis dropped from the result. Transposes are fused, not copied.
 *
 * b may be a frozen bf16/f16 weight beside an f32 a: the kernel widens its elements to f32 as it loads them (no
 * f32 copy of b is made), and the product is exactly the one with b widened beforehand. The gradient flows to a
 * only (a bf16/f16 tensor is never differentiated: see `valueAndGrad`).
 */
export function matmul(a: Tensor, b: Tensor, opts: MatmulOptions = {}): Tensor {
  return matmulPlus(a, b, opts, null);
}

/**
 * addend + op(A) op(B) in one kernel (`addend` of the product's shape and dtype, or null): the form the matmul
 * rule uses to fold the cotangent A has gathered into its own (`absorbed`). Its rule passes the product's
 * cotangent to the addend unchanged.
 */
function matmulPlus(a: Tensor, b: Tensor, opts: MatmulOptions, addend: Tensor | null): Tensor {
  if (a.rank === 0 || b.rank === 0) throw new ShapeError('matmul', [a.shape, b.shape], 'operands must have rank >= 1');
  if (isHalf(a.dtype))
    throw new DTypeError('matmul', `a is ${a.dtype}: only the B operand may be bf16/f16 (pass the weight as b)`);
  if (isHalf(b.dtype) && a.dtype !== 'f32')
    throw new DTypeError('matmul', `a ${b.dtype} b needs an f32 a, got ${a.dtype}`);
  // The rule folds only where neither a promotion nor a 1-D operand changes the product's form.
  if (addend && (a.rank < 2 || b.rank < 2 || (a.dtype !== b.dtype && !isHalf(b.dtype))))
    throw new Error('internal: matmul with an addend needs matrices of one dtype (or a half B)');
  if (a.dtype !== b.dtype && !isHalf(b.dtype)) {
    const d = promote(a.dtype as WideDType, b.dtype);
    return matmul(cast(a, d), cast(b, d), opts);
  }
  if (a.rank === 1 || b.rank === 1) {
    const a2 = a.rank === 1 ? reshape(a, [1, a.shape[0]!]) : a;
    const b2 = b.rank === 1 ? reshape(b, [b.shape[0]!, 1]) : b;
    const y = matmul(a2, b2, {
      transA: a.rank === 1 ? false : opts.transA,
      transB: b.rank === 1 ? false : opts.transB,
    });
    return squeeze(y, [...(a.rank === 1 ? [-2] : []), ...(b.rank === 1 ? [-1] : [])]);
  }
  const transA = opts.transA ?? false;
  const transB = opts.transB ?? false;
  const [m, ka] = transA ? [a.shape[a.rank - 1]!, a.shape[a.rank - 2]!] : [a.shape[a.rank - 2]!, a.shape[a.rank - 1]!];
  const [kb, n] = transB ? [b.shape[b.rank - 1]!, b.shape[b.rank - 2]!] : [b.shape[b.rank - 2]!, b.shape[b.rank - 1]!];
  if (ka !== kb) throw new ShapeError('matmul', [a.shape, b.shape], `inner dimensions differ (${ka} vs ${kb})`);
  const batch = broadcastShapes('matmul', a.shape.slice(0, -2), b.shape.slice(0, -2));
  const shape = [...batch, m, n];
  return runOp(
    'matmul',
    addend ? [a, b, addend] : [a, b],
    shape,
    a.dtype,
    (k) => k.matmul(kt('matmul', a), kt('matmul', b), transA, transB, shape, addend && kt('matmul', addend)),
    () => (g, needs, prior) => {
      // With A' = op(A), B' = op(B): dA' = G B'^T and dB' = A'^T G; transposed operands take the transposed adjoint.
      // A bf16/f16 b stays the B operand (dA = (G B'^T)^T when A is transposed): only B may be half.
      // dA = G B'^T already has A's shape when A is not transposed nor broadcast: A's gathered cotangent is then
      // added by the same kernel (the tape's add folded in; the gate and up, or q, k and v, projections of one
      // input each add into the cotangent of the one before).
      const pa = prior[0] ?? null;
      const fold = pa !== null && !transA && pa.dtype === a.dtype && shapesEqual(batch, a.shape.slice(0, -2));
      const ga = needs[0]
        ? transA
          ? isHalf(b.dtype)
            ? transpose(matmul(g, b, { transB: !transB }), -1, -2)
            : matmul(b, g, { transA: transB, transB: true })
          : matmulPlus(g, b, { transB: !transB }, fold ? pa : null)
        : null;
      const gb = needs[1]
        ? transB
          ? matmul(g, a, { transA: true, transB: transA })
          : matmul(a, g, { transA: !transA })
        : null;
      return [
        ga && (fold ? absorbed(ga) : unbroadcast(ga, a.shape)),
        gb && unbroadcast(gb, b.shape),
        needs[2] ? g : null,
      ];
    },
  );
}
