import { normAxes } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { type Axes, dropReducedAxes, expand, reduceKept, sum } from './broadcast.js';
import { cast, div, equal, exp, mul, sub, where } from './elementwise.js';
import { identityOp } from './op.js';

/**
 * Reductions over axes (all axes when none are given), with `keepdims` as in NumPy. `sum` is defined in
 * broadcast.ts, beside `expand` (each is the other's vector-Jacobian rule), and exported here with the others.
 */
export { type Axes, sum };

export function mean(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  const ax = normAxes('mean', axes, x.rank);
  const n = ax.reduce((s, a) => s * x.shape[a]!, 1);
  return div(sum(x, ax, keepdims), n);
}

/** Max over axes; ties share the cotangent equally (as JAX and PyTorch's amax do). */
export function max(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  return extremum('max', x, axes, keepdims);
}

export function min(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  return extremum('min', x, axes, keepdims);
}

function extremum(op: 'max' | 'min', x: Tensor, axes: Axes | undefined, keepdims: boolean): Tensor {
  const ax = normAxes(op, axes, x.rank);
  if (ax.length === 0) return identityOp(op, x);
  const kept = reduceKept(op, x, ax, (y) => (g) => {
    const mask = equal(x, y);
    return mul(expand(div(g, sum(mask, ax, true)), x.shape), mask);
  });
  return dropReducedAxes(kept, ax, keepdims);
}

/** log(sum(exp(x))) over axes, computed stably (the kernel subtracts the max). */
export function logsumexp(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  if (x.dtype === 'i32') return logsumexp(cast(x, 'f32'), axes, keepdims);
  const ax = normAxes('logsumexp', axes, x.rank);
  if (ax.length === 0) return identityOp('logsumexp', x);
  // A row of all -Infinity has y = -Infinity; shifting it by 0 instead keeps exp(x - y) at 0, not NaN (as JAX).
  const kept = reduceKept('logsumexp', x, ax, (y) => (g) => mul(g, exp(sub(x, where(equal(y, -Infinity), 0, y)))));
  return dropReducedAxes(kept, ax, keepdims);
}

/** Population variance over axes. */
export function variance(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  const ax = normAxes('variance', axes, x.rank);
  const centred = sub(x, mean(x, ax, true));
  return mean(mul(centred, centred), ax, keepdims);
}
