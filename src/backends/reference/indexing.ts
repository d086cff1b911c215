import type { KernelTensor, Storage } from '../../core/backend.js';
import { computeDType, isHalf, type HalfDType } from '../../core/dtype.js';
import { halfReader } from '../../core/half.js';
import { registerKernels } from '../../core/kernels.js';
import { sizeOf, type Shape } from '../../core/shape.js';
import { data, halfData, splitAt, store, type HostBackend } from './host.js';
import { addAt, axisOffsets, takeAt } from './strided.js';

/**
 * Indexing along an axis, each kernel beside its adjoint. All four are one offset map (`axisOffsets`: the dense
 * element each indexed element addresses, -1 out of range) read with `takeAt` (0 out of range) or accumulated
 * with `addAt` (out of range skipped, duplicates summed in order).
 */

// x [outer, len, inner], indices [...] (i32) -> out [outer, ...indices, inner] = x[o, indices[j], k]; a bf16/f16 x
// gives f32, each word widened as it is read
export function gather(b: HostBackend, x: KernelTensor, indices: KernelTensor, axis: number): Storage {
  const dims = splitAt(x.shape, axis);
  const idx = data(indices);
  const out = b.alloc(computeDType(x.dtype), dims[0] * idx.length * dims[2]);
  const offsets = axisOffsets(dims, idx.length, idx, true);
  if (isHalf(x.dtype)) {
    const widen = halfReader(x.dtype as HalfDType);
    const words = halfData(x);
    for (let i = 0; i < out.length; i++) out[i] = offsets[i]! >= 0 ? widen(words[offsets[i]!]!) : 0;
  } else takeAt(data(x), offsets, out);
  return store(out);
}

// gather's adjoint: updates [outer, ...indices, inner] -> out [outShape] (zero) with out[o, indices[j], k] += updates
export function scatterAdd(
  b: HostBackend,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): Storage {
  const idx = data(indices);
  const out = b.alloc(updates.dtype, sizeOf(outShape));
  addAt(data(updates), axisOffsets(splitAt(outShape, axis), idx.length, idx, true), out);
  return store(out);
}

// x [outer, len, inner], indices [outer, n, inner] (i32) -> out [outer, n, inner] = x[o, indices[o, j, k], k]
export function takeAlongAxis(b: HostBackend, x: KernelTensor, indices: KernelTensor, axis: number): Storage {
  const idx = data(indices);
  const out = b.alloc(x.dtype, idx.length);
  takeAt(data(x), axisOffsets(splitAt(x.shape, axis), indices.shape[axis]!, idx, false), out);
  return store(out);
}

// takeAlongAxis's adjoint: updates [outer, n, inner] -> out [outShape] (zero) with out[o, indices[o, j, k], k] += updates
export function putAlongAxisAdd(
  b: HostBackend,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): Storage {
  const idx = data(indices);
  const out = b.alloc(updates.dtype, sizeOf(outShape));
  addAt(data(updates), axisOffsets(splitAt(outShape, axis), indices.shape[axis]!, idx, false), out);
  return store(out);
}

registerKernels<HostBackend>('reference', { gather, scatterAdd, takeAlongAxis, putAlongAxisAdd });
