import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import { normAxis, shapesEqual, sizeOf, type Shape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { identityOp, kt, refuseGradient, runDonating, runOp, runView } from './op.js';

/** Movement ops: reshape, permute, slice, pad, concat (`expand` is in broadcast.ts, beside its adjoint `sum`). */

/** Same data, new shape; one dimension may be -1 (inferred). Shares storage, copies nothing. */
export function reshape(x: Tensor, shape: Shape): Tensor {
  const known = shape.filter((d) => d !== -1);
  const inferredCount = shape.length - known.length;
  if (inferredCount > 1) throw new ShapeError('reshape', [x.shape, shape], 'at most one dimension may be -1');
  const knownSize = sizeOf(known);
  let target = [...shape];
  if (inferredCount === 1) {
    if (knownSize === 0 || x.size % knownSize !== 0)
      throw new ShapeError('reshape', [x.shape, shape], 'cannot infer the -1 dimension');
    target = shape.map((d) => (d === -1 ? x.size / knownSize : d));
  }
  if (target.some((d) => !Number.isInteger(d) || d < 0) || sizeOf(target) !== x.size) {
    throw new ShapeError('reshape', [x.shape, shape], `cannot reshape ${x.size} elements`);
  }
  if (shapesEqual(target, x.shape)) return identityOp('reshape', x);
  return runView('reshape', x, target, () => (g) => [reshape(g, x.shape)]);
}

export const flatten = (x: Tensor): Tensor => reshape(x, [x.size]);

/** Insert a size-1 axis at `axis`. */
export function expandDims(x: Tensor, axis: number): Tensor {
  const a = normAxis('expandDims', axis, x.rank + 1);
  return reshape(x, [...x.shape.slice(0, a), 1, ...x.shape.slice(a)]);
}

/** Remove size-1 axes (all of them, or the listed ones). */
export function squeeze(x: Tensor, axes?: readonly number[]): Tensor {
  const drop = axes ? axes.map((a) => normAxis('squeeze', a, x.rank)) : x.shape.flatMap((d, i) => (d === 1 ? [i] : []));
  for (const a of drop)
    if (x.shape[a] !== 1) throw new ShapeError('squeeze', [x.shape], `axis ${a} has size ${x.shape[a]}, not 1`);
  return reshape(
    x,
    x.shape.filter((_, i) => !drop.includes(i)),
  );
}

/** Reorder axes: out.shape[i] = x.shape[perm[i]]. */
export function permute(x: Tensor, perm: readonly number[]): Tensor {
  const p = perm.map((a) => normAxis('permute', a, x.rank));
  if (p.length !== x.rank || new Set(p).size !== p.length) {
    throw new ArgumentError('permute', `[${perm.join(', ')}] is not a permutation of ${x.rank} axes`);
  }
  if (p.every((a, i) => a === i)) return identityOp('permute', x);
  const shape = p.map((a) => x.shape[a]!);
  const inverse = new Array<number>(p.length);
  p.forEach((a, i) => (inverse[a] = i));
  return runOp(
    'permute',
    [x],
    shape,
    x.dtype,
    (k) => k.permute(kt('permute', x), p),
    () => (g) => [permute(g, inverse)],
  );
}

/** Reverse the axes (no argument) or swap two of them. */
export function transpose(x: Tensor, axis1?: number, axis2?: number): Tensor {
  if (axis1 === undefined || axis2 === undefined) return permute(x, [...x.shape.keys()].reverse());
  const perm = [...x.shape.keys()];
  const a = normAxis('transpose', axis1, x.rank);
  const b = normAxis('transpose', axis2, x.rank);
  perm[a] = b;
  perm[b] = a;
  return permute(x, perm);
}

/** x[begin : begin + size] per axis; a size of -1 means to the end. Shorter lists leave trailing axes whole. */
export function slice(x: Tensor, begin: readonly number[], size?: readonly number[]): Tensor {
  if (begin.length > x.rank || (size && size.length !== begin.length)) {
    throw new ShapeError(
      'slice',
      [x.shape],
      `begin [${begin.join(', ')}] and size [${size?.join(', ') ?? ''}] do not match the rank`,
    );
  }
  const b = x.shape.map((_, i) => begin[i] ?? 0);
  const shape = x.shape.map((d, i) => {
    const s = size?.[i] ?? -1;
    return s === -1 ? d - b[i]! : s;
  });
  shape.forEach((s, i) => {
    if (!Number.isInteger(b[i]) || b[i]! < 0 || s < 0 || b[i]! + s > x.shape[i]!) {
      throw new ShapeError('slice', [x.shape], `axis ${i}: [${b[i]}, ${b[i]! + s}) is out of range`);
    }
  });
  if (shapesEqual(shape, x.shape)) return identityOp('slice', x);
  return runOp(
    'slice',
    [x],
    shape,
    x.dtype,
    (k) => k.slice(kt('slice', x), b, shape),
    () => (g) => [pad(g, b, x.shape)],
  );
}

/** Zero-pad x into `shape`, placing it at `begin`. The adjoint of slice. */
export function pad(x: Tensor, begin: readonly number[], shape: Shape): Tensor {
  if (
    begin.length !== x.rank ||
    shape.length !== x.rank ||
    x.shape.some((d, i) => begin[i]! < 0 || begin[i]! + d > shape[i]!)
  ) {
    throw new ShapeError('pad', [x.shape, shape], `does not fit at [${begin.join(', ')}]`);
  }
  if (shapesEqual(shape, x.shape)) return identityOp('pad', x);
  return runOp(
    'pad',
    [x],
    shape,
    x.dtype,
    (k) => k.pad(kt('pad', x), begin, shape),
    () => (g) => [slice(g, begin, x.shape)],
  );
}

/** Join tensors along `axis`; all other dimensions must agree. */
export function concat(xs: readonly Tensor[], axis: number): Tensor {
  if (xs.length === 0) throw new ArgumentError('concat', 'needs at least one tensor');
  const first = xs[0]!;
  const a = normAxis('concat', axis, first.rank);
  for (const x of xs) {
    if (x.rank !== first.rank || x.shape.some((d, i) => i !== a && d !== first.shape[i]) || x.dtype !== first.dtype) {
      throw new ShapeError(
        'concat',
        xs.map((t) => t.shape),
        `tensors disagree off axis ${a} (or in dtype)`,
      );
    }
  }
  if (xs.length === 1) return identityOp('concat', first);
  const shape = [...first.shape];
  shape[a] = xs.reduce((s, x) => s + x.shape[a]!, 0);
  const offsets: number[] = [];
  let offset = 0;
  for (const x of xs) {
    offsets.push(offset);
    offset += x.shape[a]!;
  }
  return runOp(
    'concat',
    xs,
    shape,
    first.dtype,
    (k) =>
      k.concat(
        xs.map((x) => kt('concat', x)),
        a,
        shape,
      ),
    () => (g, needs) =>
      xs.map((x, i) => {
        if (!needs[i]) return null;
        const begin = new Array<number>(x.rank).fill(0);
        begin[a] = offsets[i]!;
        return slice(g, begin, x.shape);
      }),
  );
}

/** Stack same-shaped tensors along a new axis. */
export function stack(xs: readonly Tensor[], axis = 0): Tensor {
  if (xs.length === 0) throw new ArgumentError('stack', 'needs at least one tensor');
  return concat(
    xs.map((x) => expandDims(x, axis)),
    axis,
  );
}

/** Split along `axis` into pieces of the given sizes. */
export function split(x: Tensor, sizes: readonly number[], axis: number): Tensor[] {
  const a = normAxis('split', axis, x.rank);
  if (sizes.reduce((s, n) => s + n, 0) !== x.shape[a]) {
    throw new ShapeError('split', [x.shape], `sizes [${sizes.join(', ')}] do not add up to axis ${a}`);
  }
  let off = 0;
  return sizes.map((n) => {
    const begin = new Array<number>(x.rank).fill(0);
    const size = [...x.shape];
    begin[a] = off;
    size[a] = n;
    off += n;
    return slice(x, begin, size);
  });
}

/**
 * dst with `update` written at [begin, begin + update.shape) (JAX's `lax.dynamic_update_slice`, without its
 * clamping: a slice out of range is a `ShapeError`). It CONSUMES dst, as a JAX argument in `donate_argnums`: dst
 * is disposed afterwards, and when it was the only reference to its storage the write happens in place (no copy
 * of dst: what makes a preallocated KV cache cost O(new rows) per step); when a view, a tape or another handle
 * shares the storage, dst is copied first and they keep seeing the old values. Not differentiable (a backward
 * pass that reaches it throws `NotDifferentiableError`): it serves caches, which are never differentiated.
 */
export function updateSlice(dst: Tensor, update: Tensor, begin: readonly number[]): Tensor {
  const op = 'updateSlice';
  if (update.rank !== dst.rank || begin.length !== dst.rank)
    throw new ShapeError(op, [dst.shape, update.shape], `update and begin [${begin.join(', ')}] need rank ${dst.rank}`);
  const fits = begin.every((b, i) => Number.isInteger(b) && b >= 0 && b + update.shape[i]! <= dst.shape[i]!);
  if (!fits) throw new ShapeError(op, [dst.shape, update.shape], `update does not fit at [${begin.join(', ')}]`);
  if (update.dtype !== dst.dtype) throw new DTypeError(op, `update is ${update.dtype}, dst is ${dst.dtype}`);
  return runDonating(
    op,
    dst,
    [update],
    (k, inPlace) => k.updateSlice(kt(op, dst), kt(op, update), begin, inPlace),
    refuseGradient(),
  );
}
