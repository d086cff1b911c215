import { deferCheck } from '../core/deferred.js';
import { computeDType } from '../core/dtype.js';
import { DTypeError, IndexRangeError, ShapeError } from '../core/errors.js';
import { keep, tidy } from '../core/scope.js';
import { normAxis } from '../core/shape.js';
import { withoutTapes } from '../core/tape.js';
import type { Tensor } from '../core/tensor.js';
import { cast } from './elementwise.js';
import { concat, reshape } from './movement.js';
import { kt, runOp } from './op.js';
import { max, min } from './reduce.js';

/** Indexing by integer tensors: embedding lookup (`gather`) and picking per-position entries (`takeAlongAxis`). */

let debugIndices = false;

/**
 * Index ranges are checked on every synchronous backend (the CPU: one pass over the indices, cheap beside the
 * kernel). On an asynchronous device a check needs a readback, so it runs only in this debug mode: the device
 * computes the indices' min and max, and the next op or read throws the `IndexRangeError` (see core/deferred.ts).
 * Without it, an out-of-range index reads 0 there (and its scatter is dropped).
 */
export function setDebugIndices(on: boolean): void {
  debugIndices = on;
}

/** Indices in [0, size): checked on a synchronous backend, deferred on a device in the debug mode. */
export function checkIndices(op: string, indices: Tensor, size: number): void {
  if (indices.dtype !== 'i32') throw new DTypeError(op, `indices must be i32, got ${indices.dtype}`);
  if (indices.size === 0) return;
  if (indices.backend.synchronous) {
    const values = indices.dataSync();
    for (let i = 0; i < values.length; i++) {
      const v = values[i]!;
      if (v < 0 || v >= size) throw new IndexRangeError(op, i, v, size);
    }
  } else if (debugIndices) deferRangeCheck(op, indices, size);
}

function deferRangeCheck(op: string, indices: Tensor, size: number): void {
  const range = keep(
    withoutTapes(() =>
      tidy(() => {
        const f = cast(indices, 'f32');
        return concat([reshape(min(f), [1]), reshape(max(f), [1])], 0);
      }),
    ),
  );
  const read = range.backend.read({ storage: range.storageFor(op), shape: range.shape, dtype: range.dtype });
  range.dispose();
  const verdict = (range: ArrayLike<number>): IndexRangeError | null => {
    const [lo, hi] = [range[0]!, range[1]!];
    return lo < 0 ? new IndexRangeError(op, -1, lo, size) : hi >= size ? new IndexRangeError(op, -1, hi, size) : null;
  };
  deferCheck(read.then(verdict));
}

/**
 * Rows of x along `axis` picked by `indices`: out.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:].
 * `gather(embeddings, tokenIds, 0)` is an embedding lookup. Indices lie in [0, size) (`checkIndices`). The adjoint adds the
 * cotangent rows back at their indices (repeated indices sum). A bf16/f16 x (frozen embeddings) gives f32 rows,
 * widened as they are copied.
 */
export function gather(x: Tensor, indices: Tensor, axis = 0): Tensor {
  const a = normAxis('gather', axis, x.rank);
  checkIndices('gather', indices, x.shape[a]!);
  const shape = [...x.shape.slice(0, a), ...indices.shape, ...x.shape.slice(a + 1)];
  return runOp(
    'gather',
    [x, indices],
    shape,
    computeDType(x.dtype),
    (k) => k.gather(kt('gather', x), kt('gather', indices), a),
    () => (g, needs) => [needs[0] ? scatterAdd(g, indices, a, x.shape) : null, null],
  );
}

/** Zeros of `shape` with `updates` added at `indices` along `axis` (the adjoint of gather). */
export function scatterAdd(updates: Tensor, indices: Tensor, axis: number, shape: readonly number[]): Tensor {
  if (!Number.isInteger(axis) || axis < 0 || axis >= shape.length) {
    throw new ShapeError('scatterAdd', [shape], `axis ${axis} is out of range`);
  }
  checkIndices('scatterAdd', indices, shape[axis]!);
  const expected = [...shape.slice(0, axis), ...indices.shape, ...shape.slice(axis + 1)];
  if (expected.length !== updates.rank || expected.some((d, i) => d !== updates.shape[i])) {
    throw new ShapeError(
      'scatterAdd',
      [updates.shape, indices.shape, shape],
      'updates do not match indices and the target shape',
    );
  }
  return runOp(
    'scatterAdd',
    [updates, indices],
    shape,
    updates.dtype,
    (k) => k.scatterAdd(kt('scatterAdd', updates), kt('scatterAdd', indices), axis, shape),
    () => (g, needs) => [needs[0] ? gather(g, indices, axis) : null, null],
  );
}

/**
 * out[..., i, ...] = x[..., indices[..., i, ...], ...] along `axis` (torch.gather / jnp.take_along_axis).
 * indices has x's rank and x's dims except on `axis`. `takeAlongAxis(logProbs, expandDims(tokens, -1), -1)`
 * picks the log-prob of each sampled token.
 */
export function takeAlongAxis(x: Tensor, indices: Tensor, axis: number): Tensor {
  const a = normAxis('takeAlongAxis', axis, x.rank);
  if (indices.rank !== x.rank || indices.shape.some((d, i) => i !== a && d !== x.shape[i])) {
    throw new ShapeError('takeAlongAxis', [x.shape, indices.shape], `indices must match x off axis ${a}`);
  }
  checkIndices('takeAlongAxis', indices, x.shape[a]!);
  return runOp(
    'takeAlongAxis',
    [x, indices],
    indices.shape,
    x.dtype,
    (k) => k.takeAlongAxis(kt('takeAlongAxis', x), kt('takeAlongAxis', indices), a),
    () => (g, needs) => [needs[0] ? putAlongAxisAdd(g, indices, a, x.shape) : null, null],
  );
}

/** Zeros of `shape` with `updates` added along `axis` at `indices` (the adjoint of takeAlongAxis). */
export function putAlongAxisAdd(updates: Tensor, indices: Tensor, axis: number, shape: readonly number[]): Tensor {
  if (!Number.isInteger(axis) || axis < 0 || axis >= shape.length || indices.rank !== shape.length) {
    throw new ShapeError(
      'putAlongAxisAdd',
      [updates.shape, indices.shape, shape],
      `axis ${axis} does not fit the shape`,
    );
  }
  checkIndices('putAlongAxisAdd', indices, shape[axis]!);
  return runOp(
    'putAlongAxisAdd',
    [updates, indices],
    shape,
    updates.dtype,
    (k) => k.putAlongAxisAdd(kt('putAlongAxisAdd', updates), kt('putAlongAxisAdd', indices), axis, shape),
    () => (g, needs) => [needs[0] ? takeAlongAxis(g, indices, axis) : null, null],
  );
}
