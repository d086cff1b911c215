import type { KernelTensor, Storage } from '../../core/backend.js';
import { isHalf, type HalfDType, type HostArray, type TypedArray } from '../../core/dtype.js';
import { halfReader } from '../../core/half.js';
import { registerKernels } from '../../core/kernels.js';
import { broadcastStrides, sizeOf, type Shape } from '../../core/shape.js';
import { data, halfData, store, type HostBackend } from './host.js';
import { stridedOffsets } from './strided.js';

// a [...batchA, M, K] (transA: [..., K, M]), b [...batchB, K, N] (transB: [..., N, K]) -> out [...batch, M, N];
// b may be bf16/f16 beside an f32 a (a frozen weight): its words are widened as B is packed, so the product is the
// one with b widened beforehand; its backward is two matmuls (the op's rule)
export function matmul(
  b: HostBackend,
  x: KernelTensor,
  y: KernelTensor,
  transA: boolean,
  transB: boolean,
  outShape: Shape,
  addend: KernelTensor | null,
): Storage {
  const out = b.alloc(x.dtype, sizeOf(outShape));
  const widen = isHalf(y.dtype) ? halfReader(y.dtype as HalfDType) : null;
  // With an addend the products stay in f64 until it is added: one rounding, as without.
  const sums = addend ? new Float64Array(out.length) : out;
  matmulLoop(data(x), x.shape, widen ? halfData(y) : data(y), y.shape, transA, transB, outShape, sums, widen);
  if (addend) {
    const d = data(addend);
    for (let i = 0; i < out.length; i++) out[i] = sums[i]! + d[i]!;
  }
  return store(out);
}

/**
 * Batched matmul on typed arrays. Each batch packs op(A) as K x M (so a column of A is contiguous) and op(B) as
 * K x N, then a 4x4 register-blocked micro-kernel keeps 16 accumulators in locals across the K loop: 16
 * multiply-adds per 8 loads instead of the i-k-j loop's load-modify-store per multiply. Accumulation is in
 * double precision (JS numbers), rounded once to the output dtype.
 */
function matmulLoop(
  a: TypedArray,
  aShape: Shape,
  b: HostArray,
  bShape: Shape,
  transA: boolean,
  transB: boolean,
  outShape: Shape,
  out: TypedArray,
  widenB: ((word: number) => number) | null,
): void {
  const r = outShape.length;
  const m = outShape[r - 2]!;
  const n = outShape[r - 1]!;
  const k = transA ? aShape[aShape.length - 2]! : aShape[aShape.length - 1]!;
  const batch = outShape.slice(0, -2);
  const aBatch = stridedOffsets(
    batch,
    broadcastStrides(aShape.slice(0, -2), batch).map((s) => s * m * k),
  );
  const bBatch = stridedOffsets(
    batch,
    broadcastStrides(bShape.slice(0, -2), batch).map((s) => s * k * n),
  );
  const ap = new Float64Array(k * m);
  const bp = new Float64Array(k * n);
  let lastA = -1;
  let lastB = -1;
  for (let t = 0; t < sizeOf(batch); t++) {
    // Broadcast batches reuse the packed operand.
    if (aBatch[t] !== lastA) packA(a, aBatch[t]!, m, k, transA, ap);
    if (bBatch[t] !== lastB)
      if (widenB) packHalfB(b as Uint16Array, widenB, bBatch[t]!, k, n, transB, bp);
      else packB(b as TypedArray, bBatch[t]!, k, n, transB, bp);
    lastA = aBatch[t]!;
    lastB = bBatch[t]!;
    multiplyPacked(ap, bp, m, k, n, out, t * m * n);
  }
}

/** ap[kk * m + i] = op(A)[i, kk]. */
function packA(a: TypedArray, off: number, m: number, k: number, trans: boolean, ap: Float64Array): void {
  if (trans) for (let i = 0; i < k * m; i++) ap[i] = a[off + i]!;
  else for (let i = 0; i < m; i++) for (let kk = 0; kk < k; kk++) ap[kk * m + i] = a[off + i * k + kk]!;
}

/** bp[kk * n + j] = op(B)[kk, j]. */
function packB(b: TypedArray, off: number, k: number, n: number, trans: boolean, bp: Float64Array): void {
  if (!trans) for (let i = 0; i < k * n; i++) bp[i] = b[off + i]!;
  else for (let j = 0; j < n; j++) for (let kk = 0; kk < k; kk++) bp[kk * n + j] = b[off + j * k + kk]!;
}

/** packB of bf16/f16 words, each widened to its f32 value. */
function packHalfB(
  b: Uint16Array,
  widen: (word: number) => number,
  off: number,
  k: number,
  n: number,
  trans: boolean,
  bp: Float64Array,
): void {
  if (!trans) for (let i = 0; i < k * n; i++) bp[i] = widen(b[off + i]!);
  else for (let j = 0; j < n; j++) for (let kk = 0; kk < k; kk++) bp[kk * n + j] = widen(b[off + j * k + kk]!);
}

function multiplyPacked(
  ap: Float64Array,
  bp: Float64Array,
  m: number,
  k: number,
  n: number,
  out: TypedArray,
  oo: number,
): void {
  const m4 = m - (m % 4);
  const n4 = n - (n % 4);
  for (let i = 0; i < m4; i += 4) {
    for (let j = 0; j < n4; j += 4) {
      let c00 = 0,
        c01 = 0,
        c02 = 0,
        c03 = 0,
        c10 = 0,
        c11 = 0,
        c12 = 0,
        c13 = 0;
      let c20 = 0,
        c21 = 0,
        c22 = 0,
        c23 = 0,
        c30 = 0,
        c31 = 0,
        c32 = 0,
        c33 = 0;
      for (let kk = 0; kk < k; kk++) {
        const ai = kk * m + i;
        const bj = kk * n + j;
        const a0 = ap[ai]!,
          a1 = ap[ai + 1]!,
          a2 = ap[ai + 2]!,
          a3 = ap[ai + 3]!;
        const b0 = bp[bj]!,
          b1 = bp[bj + 1]!,
          b2 = bp[bj + 2]!,
          b3 = bp[bj + 3]!;
        c00 += a0 * b0;
        c01 += a0 * b1;
        c02 += a0 * b2;
        c03 += a0 * b3;
        c10 += a1 * b0;
        c11 += a1 * b1;
        c12 += a1 * b2;
        c13 += a1 * b3;
        c20 += a2 * b0;
        c21 += a2 * b1;
        c22 += a2 * b2;
        c23 += a2 * b3;
        c30 += a3 * b0;
        c31 += a3 * b1;
        c32 += a3 * b2;
        c33 += a3 * b3;
      }
      let o = oo + i * n + j;
      out[o] = c00;
      out[o + 1] = c01;
      out[o + 2] = c02;
      out[o + 3] = c03;
      o += n;
      out[o] = c10;
      out[o + 1] = c11;
      out[o + 2] = c12;
      out[o + 3] = c13;
      o += n;
      out[o] = c20;
      out[o + 1] = c21;
      out[o + 2] = c22;
      out[o + 3] = c23;
      o += n;
      out[o] = c30;
      out[o + 1] = c31;
      out[o + 2] = c32;
      out[o + 3] = c33;
    }
  }
  // Edges: the rows below m4 (all columns) and the columns right of n4 (the blocked rows).
  for (let i = 0; i < m; i++) {
    for (let j = i < m4 ? n4 : 0; j < n; j++) {
      let c = 0;
      for (let kk = 0; kk < k; kk++) c += ap[kk * m + i]! * bp[kk * n + j]!;
      out[oo + i * n + j] = c;
    }
  }
}

registerKernels<HostBackend>('reference', { matmul });
