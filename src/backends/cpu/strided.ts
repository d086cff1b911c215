import { broadcastStrides, sizeOf, type Shape } from '../../core/shape.js';

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
