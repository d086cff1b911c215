import { BackendError } from '../../../core/errors.js';
import { stridesOf, type Shape } from '../../../core/shape.js';

/** Shape bookkeeping shared by the launchers: merging contiguous dims, the rank limit, contiguity. */

export const MAX_RANK = 8;

export interface Collapsed {
  readonly shape: number[];
  /** Per operand, its strides over `shape`. */
  readonly strides: number[][];
}

/**
 * Drop size-1 dims and merge neighbours over which every operand stays contiguous (stride[d] equals
 * stride[d+1] * shape[d+1]). A [2, 3, 4] broadcast add with a [4] bias becomes [6, 4]; an unbroadcast copy
 * becomes rank 1. Kernels then run with the fewest index divisions.
 */
export function collapse(shape: Shape, strides: readonly (readonly number[])[]): Collapsed {
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    const n = shape[d]!;
    if (n === 1) continue;
    const last = outShape.length - 1;
    if (last >= 0 && strides.every((s, k) => outStrides[k]![last] === s[d]! * n)) {
      outShape[last]! *= n;
      strides.forEach((s, k) => (outStrides[k]![last] = s[d]!));
    } else {
      outShape.push(n);
      strides.forEach((s, k) => outStrides[k]!.push(s[d]!));
    }
  }
  return { shape: outShape, strides: outStrides };
}

export function checkRank(kernel: string, rank: number): void {
  if (rank > MAX_RANK)
    throw new BackendError('webgpu', `${kernel}: rank ${rank} after merging contiguous dims exceeds ${MAX_RANK}`);
}

/** Is `strides` the row-major layout of `shape`? */
export const isContiguous = (shape: Shape, strides: readonly number[]): boolean => {
  const c = stridesOf(shape);
  return shape.every((d, i) => d === 1 || strides[i] === c[i]);
};
