import type { TypedArray } from '../../core/dtype.js';
import { broadcastStrides, sizeOf, type Shape } from '../../core/shape.js';
import { stridedOffsets } from './strided.js';

/**
 * Batched matmul on typed arrays: an i-k-j loop (unit stride innermost). A transposed B is first copied into
 * row-major K x N so the inner loop stays contiguous; accumulation is in the output's precision.
 */
export function matmulKernel(
  a: TypedArray,
  aShape: Shape,
  b: TypedArray,
  bShape: Shape,
  transA: boolean,
  transB: boolean,
  outShape: Shape,
  out: TypedArray,
): void {
  const r = outShape.length;
  const m = outShape[r - 2]!;
  const n = outShape[r - 1]!;
  const k = transA ? aShape[aShape.length - 2]! : aShape[aShape.length - 1]!;
  const batch = outShape.slice(0, -2);
  const aBatch = stridedOffsets(batch, broadcastStrides(aShape.slice(0, -2), batch).map((s) => s * m * k));
  const bBatch = stridedOffsets(batch, broadcastStrides(bShape.slice(0, -2), batch).map((s) => s * k * n));
  const [sai, sak] = transA ? [1, m] : [k, 1];
  const bRow = transB ? new Float64Array(k * n) : null;
  for (let t = 0; t < sizeOf(batch); t++) {
    const ao = aBatch[t]!;
    let bo = bBatch[t]!;
    let bs: TypedArray | Float64Array = b;
    if (bRow) {
      for (let kk = 0; kk < k; kk++) for (let j = 0; j < n; j++) bRow[kk * n + j] = b[bo + j * k + kk]!;
      bs = bRow;
      bo = 0;
    }
    const oo = t * m * n;
    for (let i = 0; i < m; i++) {
      const row = oo + i * n;
      for (let kk = 0; kk < k; kk++) {
        // No skipping of zero a[i,k]: 0 * NaN must stay NaN.
        const aik = a[ao + i * sai + kk * sak]!;
        const bk = bo + kk * n;
        for (let j = 0; j < n; j++) out[row + j] = out[row + j]! + aik * bs[bk + j]!;
      }
    }
  }
}
