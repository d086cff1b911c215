import type { TypedArray } from '../../core/dtype.js';
import { broadcastStrides, sizeOf, type Shape } from '../../core/shape.js';

/**
 * Offset maps, and the three loops that move data along one. Every layout and indexing kernel of the reference
 * backend is an offset map (which source or destination element each element goes to) plus one of these loops:
 * `takeAt` (expand, permute, slice, gather, takeAlongAxis), `putAt` (pad, concat, updateSlice) and `addAt`
 * (scatterAdd, putAlongAxisAdd, and a sum reduction's accumulation).
 */

/**
 * For each element of `outShape` in row-major order, the flat offset `offset + sum(index[d] * strides[d])`.
 * One routine serves permute, slice, expand, pad, concat, broadcasting and reductions.
 */
export function stridedOffsets(outShape: Shape, strides: readonly number[], offset = 0): Int32Array {
  const n = sizeOf(outShape);
  const rank = outShape.length;
  const out = new Int32Array(n);
  const idx = new Int32Array(rank);
  let off = offset;
  for (let i = 0; i < n; i++) {
    out[i] = off;
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]!++;
      off += strides[d]!;
      if (idx[d]! < outShape[d]!) break;
      off -= strides[d]! * outShape[d]!;
      idx[d] = 0;
    }
  }
  return out;
}

/** Offsets into a tensor of `shape` read as broadcast to `outShape`; null when no broadcasting is needed. */
export function broadcastOffsets(shape: Shape, outShape: Shape): Int32Array | null {
  if (shape.length === outShape.length && shape.every((d, i) => d === outShape[i])) return null;
  return stridedOffsets(outShape, broadcastStrides(shape, outShape));
}

/**
 * Indexing along one axis. The dense side is [outer, len, inner], the indexed side [outer, n, inner]; for each
 * indexed element (o, j, k) in row-major order, the dense offset (o, r, k) of its index r, or -1 when r is
 * outside [0, len). r is `indices[j]` when `shared` (gather: one index list for every o and k), else the
 * index at the element's own position (takeAlongAxis: indices has the indexed side's shape).
 */
export function axisOffsets(
  [outer, len, inner]: readonly [number, number, number],
  n: number,
  indices: TypedArray,
  shared: boolean,
): Int32Array {
  const out = new Int32Array(outer * n * inner);
  let p = 0;
  for (let o = 0; o < outer; o++) {
    for (let j = 0; j < n; j++) {
      for (let k = 0; k < inner; k++, p++) {
        const r = indices[shared ? j : p]!;
        out[p] = r >= 0 && r < len ? (o * len + r) * inner + k : -1;
      }
    }
  }
  return out;
}

/** out[i] = src[offsets[i]], or 0 where the offset is -1; a plain copy when `offsets` is null. */
export function takeAt(src: TypedArray, offsets: Int32Array | null, out: TypedArray): void {
  if (offsets === null) {
    out.set(src);
    return;
  }
  for (let i = 0; i < out.length; i++) {
    const o = offsets[i]!;
    out[i] = o >= 0 ? src[o]! : 0;
  }
}

/** out[offsets[i]] = src[i] for every i (the offsets distinct). */
export function putAt(src: TypedArray, offsets: Int32Array, out: TypedArray): void {
  for (let i = 0; i < src.length; i++) out[offsets[i]!] = src[i]!;
}

/**
 * acc[offsets[i]] += src[i] in increasing i, skipping -1: duplicates sum in this one order (the WebGPU kernels
 * sum in it too). `acc` is the output (rounded at each add) or a wider accumulator (a reduction's f64).
 */
export function addAt(src: TypedArray, offsets: Int32Array, acc: TypedArray): void {
  for (let i = 0; i < src.length; i++) {
    const o = offsets[i]!;
    if (o >= 0) acc[o] = acc[o]! + src[i]!;
  }
}
