import type { ReduceOp } from '../core/kernels.js';
import { ShapeError } from '../core/errors.js';
import { broadcastShapes, normAxes, shapesEqual, type Shape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { reshape } from './movement.js';
import { identityOp, kt, runOp } from './op.js';

/**
 * Broadcasting and its adjoint: `expand`'s vector-Jacobian rule is a `sum` over the broadcast axes
 * (`unbroadcast`, also the rule of every broadcasting elementwise op and of a batched matmul), and `sum`'s is an
 * `expand`. The two rules call each other, so the two ops live in one module; the other reductions
 * (reduce.ts, which exports `sum` too) and movement ops (movement.ts) build on it.
 */

/** Axes to reduce over: one, a list, or (left out) all of them. */
export type Axes = number | readonly number[];

/** Broadcast to `shape` by NumPy rules, materialised. Its adjoint sums over the broadcast axes. */
export function expand(x: Tensor, shape: Shape): Tensor {
  const out = broadcastShapes('expand', x.shape, shape);
  if (!shapesEqual(out, shape))
    throw new ShapeError('expand', [x.shape, shape], 'the target shape must be the broadcast shape');
  if (shapesEqual(x.shape, shape)) return identityOp('expand', x);
  return runOp(
    'expand',
    [x],
    shape,
    x.dtype,
    (k) => k.expand(kt('expand', x), shape),
    () => (g) => [unbroadcast(g, x.shape)],
  );
}

/** NumPy's and JAX's name for `expand`. */
export const broadcastTo = expand;

/** Sum a broadcast cotangent back down to `shape`. */
export function unbroadcast(g: Tensor, shape: Shape): Tensor {
  if (shapesEqual(g.shape, shape)) return g;
  const lead = g.rank - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < g.rank; i++) if (i < lead || (shape[i - lead] === 1 && g.shape[i] !== 1)) axes.push(i);
  return reshape(sum(g, axes, true), shape);
}

export function sum(x: Tensor, axes?: Axes, keepdims = false): Tensor {
  const ax = normAxes('sum', axes, x.rank);
  if (ax.length === 0) return identityOp('sum', x);
  const kept = reduceKept('sum', x, ax, () => (g) => expand(g, x.shape));
  return dropReducedAxes(kept, ax, keepdims);
}

/** Run a reduction kernel (every reduction's door); the result keeps the reduced axes as size 1. */
export function reduceKept(op: ReduceOp, x: Tensor, axes: number[], vjp: (y: Tensor) => (g: Tensor) => Tensor): Tensor {
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

/** A reduction's result with its reduced (size-1) axes dropped, unless `keepdims`. */
export function dropReducedAxes(kept: Tensor, axes: number[], keepdims: boolean): Tensor {
  return keepdims
    ? kept
    : reshape(
        kept,
        kept.shape.filter((_, i) => !axes.includes(i)),
      );
}
