import { DTypeError, ShapeError } from '../core/errors.js';
import { normAxis } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { kt, runOp } from './op.js';

/** Indexing by integer tensors: embedding lookup (`gather`) and picking per-position entries (`takeAlongAxis`). */

function checkIndices(op: string, indices: Tensor): void {
  if (indices.dtype !== 'i32') throw new DTypeError(op, `indices must be i32, got ${indices.dtype}`);
}

/**
 * Rows of x along `axis` picked by `indices`: out.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:].
 * `gather(embeddings, tokenIds, 0)` is an embedding lookup. Out-of-range indices read 0. The adjoint adds the
 * cotangent rows back at their indices (repeated indices sum).
 */
export function gather(x: Tensor, indices: Tensor, axis = 0): Tensor {
  checkIndices('gather', indices);
  const a = normAxis('gather', axis, x.rank);
  const shape = [...x.shape.slice(0, a), ...indices.shape, ...x.shape.slice(a + 1)];
  return runOp('gather', [x, indices], shape, x.dtype, (b) => b.gather(kt('gather', x), kt('gather', indices), a), () => (g, needs) => [
    needs[0] ? scatterAdd(g, indices, a, x.shape) : null,
    null,
  ]);
}

/** Zeros of `shape` with `updates` added at `indices` along `axis` (the adjoint of gather). */
export function scatterAdd(updates: Tensor, indices: Tensor, axis: number, shape: readonly number[]): Tensor {
  checkIndices('scatterAdd', indices);
  const expected = [...shape.slice(0, axis), ...indices.shape, ...shape.slice(axis + 1)];
  if (expected.length !== updates.rank || expected.some((d, i) => d !== updates.shape[i])) {
    throw new ShapeError('scatterAdd', [updates.shape, indices.shape, shape], 'updates do not match indices and the target shape');
  }
  return runOp('scatterAdd', [updates, indices], shape, updates.dtype, (b) => b.scatterAdd(kt('scatterAdd', updates), kt('scatterAdd', indices), axis, shape), () => (g, needs) => [
    needs[0] ? gather(g, indices, axis) : null,
    null,
  ]);
}

/**
 * out[..., i, ...] = x[..., indices[..., i, ...], ...] along `axis` (torch.gather / jnp.take_along_axis).
 * indices has x's rank and x's dims except on `axis`. `takeAlongAxis(logProbs, expandDims(tokens, -1), -1)`
 * picks the log-prob of each sampled token.
 */
export function takeAlongAxis(x: Tensor, indices: Tensor, axis: number): Tensor {
  checkIndices('takeAlongAxis', indices);
  const a = normAxis('takeAlongAxis', axis, x.rank);
  if (indices.rank !== x.rank || indices.shape.some((d, i) => i !== a && d !== x.shape[i])) {
    throw new ShapeError('takeAlongAxis', [x.shape, indices.shape], `indices must match x off axis ${a}`);
  }
  return runOp('takeAlongAxis', [x, indices], indices.shape, x.dtype, (b) => b.takeAlongAxis(kt('takeAlongAxis', x), kt('takeAlongAxis', indices), a), () => (g, needs) => [
    needs[0] ? putAlongAxisAdd(g, indices, a, x.shape) : null,
    null,
  ]);
}

/** Zeros of `shape` with `updates` added along `axis` at `indices` (the adjoint of takeAlongAxis). */
export function putAlongAxisAdd(updates: Tensor, indices: Tensor, axis: number, shape: readonly number[]): Tensor {
  checkIndices('putAlongAxisAdd', indices);
  return runOp('putAlongAxisAdd', [updates, indices], shape, updates.dtype, (b) => b.putAlongAxisAdd(kt('putAlongAxisAdd', updates), kt('putAlongAxisAdd', indices), axis, shape), () => (g, needs) => [
    needs[0] ? takeAlongAxis(g, indices, axis) : null,
    null,
  ]);
}
