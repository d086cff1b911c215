import type { BinaryOp, UnaryOp } from '../core/kernels.js';
import { isFloat, isHalf, promote, type DType, type WideDType } from '../core/dtype.js';
import { ArgumentError, DTypeError } from '../core/errors.js';
import { broadcastShapes } from '../core/shape.js';
import { setAccumulate } from '../core/tape.js';
import { Tensor } from '../core/tensor.js';
import { full } from './creation.js';
import { unbroadcast } from './broadcast.js';
import { halfInputError, identityOp, kt, runOp } from './op.js';

/** Elementwise ops: forwards and vector-Jacobian rules. Their scalar kernels are in `core/elementwise-kernels.ts`. */
export type Operand = Tensor | number;

/**
 * Dtype rules (JAX's and NumPy's, for the three dtypes here): two tensors promote along i32 < f32 < f64. A number
 * is weakly typed: it takes the tensor's dtype, except that a non-integer number beside an i32 tensor promotes
 * the pair to f32 (`mul(i32, 0.5)` is f32, `mul(i32, 2)` stays i32; JS cannot tell 2.0 from 2). Division and
 * the transcendental unary ops of an i32 tensor give f32 (`jnp.log(int)` and `int / int` are floats).
 */
const weakDType = (x: number, like: Tensor): DType =>
  like.dtype === 'i32' && !Number.isInteger(x) ? 'f32' : like.dtype;

/** Lift a number to a scalar tensor beside `like`. */
const lift = (x: Operand, like: Tensor): Tensor =>
  x instanceof Tensor ? x : full([], x, { dtype: weakDType(x, like), backend: like.backend });

const FLOAT_ONLY: ReadonlySet<UnaryOp> = new Set<UnaryOp>([
  ...['exp', 'log', 'sqrt', 'rsqrt', 'tanh', 'sigmoid', 'gelu', 'silu', 'reciprocal'],
  ...['geluGrad', 'siluGrad'],
] as UnaryOp[]);

/** Refuse a bf16/f16 operand before promotion would widen it silently into a whole f32 copy. */
function refuseHalf(op: string, ...xs: Tensor[]): void {
  for (const x of xs) if (isHalf(x.dtype)) throw halfInputError(op, x.dtype);
}

/**
 * x converted to `dtype`. A bf16/f16 tensor casts to f32 only (exact: an explicit widening, a whole f32 copy); no
 * cast makes half-precision storage (create it with `tensor(values, shape, { dtype })` or `fromHalfBits`).
 */
export function cast(x: Tensor, dtype: Tensor['dtype']): Tensor {
  if (x.dtype === dtype) return identityOp('cast', x);
  if (isHalf(dtype)) throw new DTypeError('cast', `cannot cast to ${dtype}; make one with tensor() or fromHalfBits()`);
  if (isHalf(x.dtype) && dtype !== 'f32')
    throw new DTypeError('cast', `a ${x.dtype} tensor casts to f32 only, not ${dtype}`);
  return runOp(
    'cast',
    [x],
    x.shape,
    dtype,
    (k) => k.cast(kt('cast', x), dtype),
    () => (g) => [isFloat(x.dtype) ? cast(g, x.dtype) : null],
  );
}

function unary(op: UnaryOp, x: Tensor, vjp?: (g: Tensor, y: Tensor) => Tensor): Tensor {
  if (x.dtype === 'i32' && FLOAT_ONLY.has(op)) return unary(op, cast(x, 'f32'), vjp);
  return runOp(op, [x], x.shape, x.dtype, (k) => k.unary(op, kt(op, x)), vjp && ((y) => (g) => [vjp(g, y)]));
}

export const neg = (x: Tensor): Tensor => unary('neg', x, (g) => neg(g));
export const exp = (x: Tensor): Tensor => unary('exp', x, (g, y) => mul(g, y));
export const log = (x: Tensor): Tensor => unary('log', x, (g) => div(g, x));
export const sqrt = (x: Tensor): Tensor => unary('sqrt', x, (g, y) => div(mul(g, 0.5), y));
export const rsqrt = (x: Tensor): Tensor => unary('rsqrt', x, (g, y) => mul(g, mul(-0.5, mul(y, square(y)))));
export const tanh = (x: Tensor): Tensor => unary('tanh', x, (g, y) => mul(g, sub(1, square(y))));
export const sigmoid = (x: Tensor): Tensor => unary('sigmoid', x, (g, y) => mul(g, mul(y, sub(1, y))));
export const gelu = (x: Tensor): Tensor => unary('gelu', x, (g) => mul(g, unary('geluGrad', x)));
export const silu = (x: Tensor): Tensor => unary('silu', x, (g) => mul(g, unary('siluGrad', x)));
export const abs = (x: Tensor): Tensor => unary('abs', x, (g) => mul(g, sign(x)));
export const square = (x: Tensor): Tensor => unary('square', x, (g) => mul(g, mul(x, 2)));
export const reciprocal = (x: Tensor): Tensor => unary('reciprocal', x, (g, y) => neg(mul(g, square(y))));
export const relu = (x: Tensor): Tensor => unary('relu', x, (g) => mul(g, unary('step', x)));
/** -1, 0 or 1; its derivative is zero almost everywhere. */
export const sign = (x: Tensor): Tensor => unary('sign', x, (g) => mul(g, 0));

function binary(
  op: BinaryOp,
  a: Operand,
  b: Operand,
  vjp?: (g: Tensor, a: Tensor, b: Tensor, y: Tensor) => [Tensor | null, Tensor | null],
): Tensor {
  if (!(a instanceof Tensor) && !(b instanceof Tensor))
    throw new ArgumentError(op, 'needs at least one tensor operand');
  const ta = a instanceof Tensor ? a : lift(a, b as Tensor);
  const tb = b instanceof Tensor ? b : lift(b, ta);
  refuseHalf(op, ta, tb);
  if (ta.dtype !== tb.dtype) {
    const d = promote(ta.dtype as WideDType, tb.dtype as WideDType);
    return binary(op, cast(ta, d), cast(tb, d), vjp);
  }
  if (op === 'div' && ta.dtype === 'i32') return binary(op, cast(ta, 'f32'), cast(tb, 'f32'), vjp);
  const shape = broadcastShapes(op, ta.shape, tb.shape);
  return runOp(
    op,
    [ta, tb],
    shape,
    ta.dtype,
    (k) => k.binary(op, kt(op, ta), kt(op, tb), shape),
    vjp &&
      ((y) => (g, needs) => {
        const [ga, gb] = vjp(g, ta, tb, y);
        return [needs[0] && ga ? unbroadcast(ga, ta.shape) : null, needs[1] && gb ? unbroadcast(gb, tb.shape) : null];
      }),
  );
}

export const add = (a: Operand, b: Operand): Tensor => binary('add', a, b, (g) => [g, g]);
export const sub = (a: Operand, b: Operand): Tensor => binary('sub', a, b, (g) => [g, neg(g)]);
export const mul = (a: Operand, b: Operand): Tensor => binary('mul', a, b, (g, x, y) => [mul(g, y), mul(g, x)]);
export const div = (a: Operand, b: Operand): Tensor =>
  binary('div', a, b, (g, _x, y, out) => [div(g, y), neg(div(mul(g, out), y))]);
/** a ** b. The derivative in b uses log(a) where a > 0 and 0 elsewhere (the real power is undefined there). */
export const pow = (a: Operand, b: Operand): Tensor =>
  binary('pow', a, b, (g, x, y, out) => [
    mul(g, mul(y, pow(x, sub(y, 1)))),
    mul(g, mul(out, where(greater(x, 0), log(where(greater(x, 0), x, 1)), 0))),
  ]);
/** Elementwise max; at ties each side gets half the cotangent (as JAX does). */
export const maximum = (a: Operand, b: Operand): Tensor =>
  binary('maximum', a, b, (g, x, y) => {
    const share = add(greater(x, y), mul(equal(x, y), 0.5));
    return [mul(g, share), mul(g, sub(1, share))];
  });
export const minimum = (a: Operand, b: Operand): Tensor =>
  binary('minimum', a, b, (g, x, y) => {
    const share = add(less(x, y), mul(equal(x, y), 0.5));
    return [mul(g, share), mul(g, sub(1, share))];
  });

/** Comparison masks: 1 where true, 0 where false, in the operands' dtype. Not differentiable (zero gradient). */
export const equal = (a: Operand, b: Operand): Tensor => binary('eq', a, b);
export const notEqual = (a: Operand, b: Operand): Tensor => binary('ne', a, b);
export const less = (a: Operand, b: Operand): Tensor => binary('lt', a, b);
export const lessEqual = (a: Operand, b: Operand): Tensor => binary('le', a, b);
export const greater = (a: Operand, b: Operand): Tensor => binary('gt', a, b);
export const greaterEqual = (a: Operand, b: Operand): Tensor => binary('ge', a, b);

/** cond ? a : b with broadcasting; cond is any dtype, nonzero meaning true. */
export function where(cond: Tensor, a: Operand, b: Operand): Tensor {
  let ta = a instanceof Tensor ? a : lift(a, b instanceof Tensor ? b : cond);
  let tb = b instanceof Tensor ? b : lift(b, ta);
  refuseHalf('where', cond, ta, tb);
  if (ta.dtype !== tb.dtype) {
    const d = promote(ta.dtype as WideDType, tb.dtype as WideDType);
    ta = cast(ta, d);
    tb = cast(tb, d);
  }
  const shape = broadcastShapes('where', cond.shape, ta.shape, tb.shape);
  return runOp(
    'where',
    [cond, ta, tb],
    shape,
    ta.dtype,
    (k) => k.where(kt('where', cond), kt('where', ta), kt('where', tb), shape),
    () => (g, needs) => {
      const zero = full([], 0, { dtype: g.dtype, backend: g.backend });
      return [
        null,
        needs[1] ? unbroadcast(where(cond, g, zero), ta.shape) : null,
        needs[2] ? unbroadcast(where(cond, zero, g), tb.shape) : null,
      ];
    },
  );
}

/**
 * Clamp to [lo, hi]. The gradient passes where lo <= x <= hi (boundaries included, as PyTorch's clamp does),
 * and flows to tensor bounds where they are the active side.
 */
export function clamp(x: Tensor, lo: Operand | null, hi: Operand | null): Tensor {
  let y = x;
  if (lo !== null) y = where(less(y, lo), lo, y);
  if (hi !== null) y = where(greater(y, hi), hi, y);
  return y;
}

setAccumulate((a, b) => add(a, b));
