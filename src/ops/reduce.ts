import type { ReduceOp } from '../core/kernels.js';
import { normAxes } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast, div, equal, exp, mul, sub, where } from './elementwise.js';
import { expand, reshape } from './movement.js';
import { identityOp, kt, runOp } from './op.js';

/** Reductions over axes (all axes when none are given), with `keepdims` as in NumPy. */
export type Axes = number | readonly number[];

/** Run a reduction kernel; the result keeps the reduced axes as size 1. */
function reduceKept(op: ReduceOp, x: Tensor, axes: number[], vjp: (y: Tensor) => (g: Tensor) => Tensor): Tensor {
  const shape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  return runOp(
    op,
    [x],
    shape,
    x.dtype,
    (k) => k.reduce(op, kt(op, x), axes),
    (y) => {
      const rule = vjp(y);
      return (g) => [rule(g)];
    },
  );
}

function finish(kept: Tensor, axes: number[], keepdims: boolean): Tensor {
  return keepdims
    ? kept
    : reshape(
        kept,
        kept.shape.filter((_, i) => !axes.includes(i)),
      );
}

export function sum(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  const ax = normAxes('sum', axes, x.rank);
  if (ax.length === 0) return identityOp('sum', x);
  const kept = reduceKept('sum', x, ax, () => (g) => expand(g, x.shape));
  return finish(kept, ax, keepdims);
}

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
  return finish(kept, ax, keepdims);
}

/** log(sum(exp(x))) over axes, computed stably (the kernel subtracts the max). */
export function logsumexp(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  if (x.dtype === 'i32') return logsumexp(cast(x, 'f32'), axes, keepdims);
  const ax = normAxes('logsumexp', axes, x.rank);
  if (ax.length === 0) return identityOp('logsumexp', x);
  // A row of all -Infinity has y = -Infinity; shifting it by 0 instead keeps exp(x - y) at 0, not NaN (as JAX).
  const kept = reduceKept('logsumexp', x, ax, (y) => (g) => mul(g, exp(sub(x, where(equal(y, -Infinity), 0, y)))));
  return finish(kept, ax, keepdims);
}

/** Population variance over axes. */
export function variance(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  const ax = normAxes('variance', axes, x.rank);
  const centred = sub(x, mean(x, ax, true));
  return mean(mul(centred, centred), ax, keepdims);
}
