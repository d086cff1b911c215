import { madd } from './math';

// C[M, N] = op(A)[M, K] . op(B)[K, N], f32, as the GotoBLAS/BLIS papers lay it out: B is packed into panels of NR
// columns (KC x NR, contiguous), A is read in place (see `micro`), and a register-blocked MR x NR micro-kernel
// keeps 8 f32x4 accumulators across its K loop (4 x 8: V8 allocates 15 xmm registers, and a 6 x 8 tile spilled 4
// accumulators to the stack every step: 26 against 34 GFLOP/s on one core here). Strides make every transpose one
// code path: element (i, k) of op(A) is at a[i * sai + k * sak], element (k, j) of op(B) at b[k * sbk + j * sbj].
//
// Determinism: an element of C is the sum over K in blocks of KC (in order), each block summed in order of k from
// 0, so its value depends on neither the thread count nor the partition of C among threads.

const MR = 4;
const NR = 8;
const KC = 256;
const MC = 120; // a multiple of MR
const NC = 512; // a multiple of NR

/** Floats of per-thread scratch `gemm` needs: the packed B block and one edge tile. */
export function gemmScratchFloats(): i32 {
  return KC * NC + MR * NR;
}

/** Columns 4t..4t+3 of four rows (r0..r3) as four vectors: a 4 x 4 transpose by shuffles (values copied exactly). */
@inline function store4x4(dst: usize, step: usize, r0: v128, r1: v128, r2: v128, r3: v128): void {
  const t0 = v128.shuffle<f32>(r0, r1, 0, 4, 1, 5);
  const t1 = v128.shuffle<f32>(r0, r1, 2, 6, 3, 7);
  const t2 = v128.shuffle<f32>(r2, r3, 0, 4, 1, 5);
  const t3 = v128.shuffle<f32>(r2, r3, 2, 6, 3, 7);
  v128.store(dst, v128.shuffle<f32>(t0, t2, 0, 1, 4, 5));
  v128.store(dst + step, v128.shuffle<f32>(t0, t2, 2, 3, 6, 7));
  v128.store(dst + 2 * step, v128.shuffle<f32>(t1, t3, 0, 1, 4, 5));
  v128.store(dst + 3 * step, v128.shuffle<f32>(t1, t3, 2, 3, 6, 7));
}

function packB(bp: usize, b: usize, pc: i32, jc: i32, kc: i32, nc: i32, sbk: i32, sbj: i32): void {
  // bp[(jp * kc + kk) * NR + jj] = B[pc + kk, jc + jp * NR + jj], zero past nc.
  for (let jp = 0; jp < nc; jp += NR) {
    const w = min(NR, nc - jp);
    let dst = bp + (<usize>(jp * kc) << 2);
    if (sbj == 1 && w == NR) {
      for (let kk = 0; kk < kc; kk++) {
        const src = b + (<usize>((pc + kk) * sbk + jc + jp) << 2);
        v128.store(dst, v128.load(src));
        v128.store(dst, v128.load(src, 16), 16);
        dst += NR << 2;
      }
    } else if (sbk == 1 && w == NR) {
      // B transposed (a weight stored [out, in]): column j of the panel is a contiguous row; transpose 8 x 4 blocks.
      const row = <usize>sbj << 2;
      const src = b + (<usize>((jc + jp) * sbj + pc) << 2);
      let kk = 0;
      for (; kk + 4 <= kc; kk += 4) {
        const o = src + (<usize>kk << 2);
        store4x4(dst, NR << 2, v128.load(o), v128.load(o + row), v128.load(o + 2 * row), v128.load(o + 3 * row));
        store4x4(dst + 16, NR << 2, v128.load(o + 4 * row), v128.load(o + 5 * row), v128.load(o + 6 * row), v128.load(o + 7 * row));
        dst += 4 * NR << 2;
      }
      for (; kk < kc; kk++) {
        for (let jj = 0; jj < NR; jj++) store<f32>(dst + (<usize>jj << 2), load<f32>(src + <usize>jj * row + (<usize>kk << 2)));
        dst += NR << 2;
      }
    } else {
      for (let kk = 0; kk < kc; kk++) {
        for (let jj = 0; jj < NR; jj++) {
          const v: f32 = jj < w ? load<f32>(b + (<usize>((pc + kk) * sbk + (jc + jp + jj) * sbj) << 2)) : 0;
          store<f32>(dst + (<usize>jj << 2), v);
        }
        dst += NR << 2;
      }
    }
  }
}

// Frozen weights stored as bf16 or f16 (kind 1 or 2) are packed into the same f32 panels, each element widened
// exactly as it is copied, so the micro-kernel and the sums are those of the f32 product with the weight widened
// beforehand, and no f32 copy of the weight exists outside this thread's KC x NC panel.
const BF16: i32 = 1;

/** Four 16-bit words (zero-extended in 32-bit lanes) as the f32 values they encode. */
@inline function widen4(w: v128, kind: i32): v128 {
  // bf16 is the top half of an f32.
  if (kind == BF16) return i32x4.shl(w, 16);
  // f16: the exponent and mantissa shifted into f32 position are the value times 2^-112 (subnormals included:
  // wasm keeps f32 subnormals, and a power-of-two product is exact); infinities and NaNs get the f32 exponent.
  const em = v128.and(w, i32x4.splat(0x7fff));
  const shifted = i32x4.shl(em, 13);
  const finite = f32x4.mul(shifted, f32x4.splat(<f32>5.192296858534828e33)); // 2^112
  const special = v128.or(shifted, i32x4.splat(0x7f800000));
  const value = v128.bitselect(special, finite, i32x4.ge_u(em, i32x4.splat(0x7c00)));
  return v128.or(value, i32x4.shl(v128.and(w, i32x4.splat(0x8000)), 16));
}

/** One 16-bit word as the f32 it encodes (widen4's arithmetic, one lane). */
@inline function widen1(w: u32, kind: i32): f32 {
  if (kind == BF16) return reinterpret<f32>(w << 16);
  const em = w & 0x7fff;
  const sign = (w & 0x8000) << 16;
  if (em >= 0x7c00) return reinterpret<f32>(sign | 0x7f800000 | (em << 13));
  return reinterpret<f32>(sign | reinterpret<u32>(reinterpret<f32>(em << 13) * <f32>5.192296858534828e33));
}

// packB for a bf16/f16 B (kind BF16 or F16): element (k, j) of op(B) at b + 2 (k sbk + j sbj).
function packHalfB(bp: usize, b: usize, pc: i32, jc: i32, kc: i32, nc: i32, sbk: i32, sbj: i32, kind: i32): void {
  for (let jp = 0; jp < nc; jp += NR) {
    const w = min(NR, nc - jp);
    let dst = bp + (<usize>(jp * kc) << 2);
    if (sbj == 1 && w == NR) {
      // B as stored [K, N]: 8 consecutive words of a row are one panel row.
      for (let kk = 0; kk < kc; kk++) {
        const words = v128.load(b + (<usize>((pc + kk) * sbk + jc + jp) << 1));
        v128.store(dst, widen4(i32x4.extend_low_i16x8_u(words), kind));
        v128.store(dst, widen4(i32x4.extend_high_i16x8_u(words), kind), 16);
        dst += NR << 2;
      }
    } else if (sbk == 1 && w == NR) {
      // B transposed (a weight stored [out, in]): 4 words along k of each of the 8 columns, transposed 4 x 4.
      const row = <usize>sbj << 1;
      const src = b + (<usize>((jc + jp) * sbj + pc) << 1);
      let kk = 0;
      for (; kk + 4 <= kc; kk += 4) {
        const o = src + (<usize>kk << 1);
        store4x4(
          dst,
          NR << 2,
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + row)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 2 * row)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 3 * row)), kind),
        );
        store4x4(
          dst + 16,
          NR << 2,
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 4 * row)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 5 * row)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 6 * row)), kind),
          widen4(i32x4.extend_low_i16x8_u(v128.load64_zero(o + 7 * row)), kind),
        );
        dst += 4 * NR << 2;
      }
      for (; kk < kc; kk++) {
        for (let jj = 0; jj < NR; jj++)
          store<f32>(dst + (<usize>jj << 2), widen1(<u32>load<u16>(src + <usize>jj * row + (<usize>kk << 1)), kind));
        dst += NR << 2;
      }
    } else {
      for (let kk = 0; kk < kc; kk++) {
        for (let jj = 0; jj < NR; jj++) {
          const v: f32 =
            jj < w ? widen1(<u32>load<u16>(b + (<usize>((pc + kk) * sbk + (jc + jp + jj) * sbj) << 1)), kind) : 0;
          store<f32>(dst + (<usize>jj << 2), v);
        }
        dst += NR << 2;
      }
    }
  }
}

// The MR x NR micro-kernel: acc = A . Bp over kc, then C (= or +=) acc. A partial tile goes through `tile`.
// A is read where it lies, not packed: row ii of the tile starts at a + ii * rowStep and steps by kStep bytes along
// k (any transpose: 4 bytes along a row, or a row's length). A's blocks are small here (a row block of MC x KC is
// at most 120 KiB, in cache), and packing copied every element of A once per column block with scalar strided
// loads, 8-15% of a product with N = 64. Rows past h (an edge tile) read row 0 again; their sums are not stored.
function micro(
  a: usize, rowStep: usize, kStep: usize, bp: usize, kc: i32, c: usize, ldc: i32, first: bool, h: i32, w: i32,
  tile: usize,
): void {
  // 8 accumulators + 2 B vectors + the A splats fit V8's 15 allocatable xmm registers (a 6 x 8 tile spilled 4).
  let c00 = f32x4.splat(0), c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0), c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0), c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0), c31 = f32x4.splat(0);
  let a0 = a;
  let a1 = h > 1 ? a + rowStep : a;
  let a2 = h > 2 ? a + 2 * rowStep : a;
  let a3 = h > 3 ? a + 3 * rowStep : a;
  for (let kk = 0; kk < kc; kk++) {
    const b0 = v128.load(bp);
    const b1 = v128.load(bp, 16);
    let x = v128.load32_splat(a0);
    c00 = madd(x, b0, c00);
    c01 = madd(x, b1, c01);
    x = v128.load32_splat(a1);
    c10 = madd(x, b0, c10);
    c11 = madd(x, b1, c11);
    x = v128.load32_splat(a2);
    c20 = madd(x, b0, c20);
    c21 = madd(x, b1, c21);
    x = v128.load32_splat(a3);
    c30 = madd(x, b0, c30);
    c31 = madd(x, b1, c31);
    a0 += kStep;
    a1 += kStep;
    a2 += kStep;
    a3 += kStep;
    bp += NR << 2;
  }
  const full = h == MR && w == NR;
  const dst = full ? c : tile;
  const ld: usize = full ? <usize>ldc << 2 : NR << 2;
  const acc = full && !first;
  let row = dst;
  v128.store(row, acc ? f32x4.add(v128.load(row), c00) : c00);
  v128.store(row, acc ? f32x4.add(v128.load(row, 16), c01) : c01, 16);
  row += ld;
  v128.store(row, acc ? f32x4.add(v128.load(row), c10) : c10);
  v128.store(row, acc ? f32x4.add(v128.load(row, 16), c11) : c11, 16);
  row += ld;
  v128.store(row, acc ? f32x4.add(v128.load(row), c20) : c20);
  v128.store(row, acc ? f32x4.add(v128.load(row, 16), c21) : c21, 16);
  row += ld;
  v128.store(row, acc ? f32x4.add(v128.load(row), c30) : c30);
  v128.store(row, acc ? f32x4.add(v128.load(row, 16), c31) : c31, 16);
  if (!full) {
    for (let i = 0; i < h; i++) {
      for (let j = 0; j < w; j++) {
        const o = c + (<usize>(i * ldc + j) << 2);
        const t = load<f32>(tile + (<usize>(i * NR + j) << 2));
        store<f32>(o, first ? t : load<f32>(o) + t);
      }
    }
  }
}

/**
 * This thread's part of C = op(A) op(B): threads split C into fixed column (or row) ranges, a multiple of NR (MR)
 * wide. Thread t uses `gemmScratchFloats()` floats at scratch + t * scratchBytes (16-byte aligned).
 */
export function gemm(
  a: usize, b: usize, c: usize, m: i32, n: i32, k: i32,
  sai: i32, sak: i32, sbk: i32, sbj: i32, ldc: i32, scratch: usize, scratchBytes: usize, tid: i32, nthreads: i32,
): void {
  let m0 = 0, m1 = m, n0 = 0, n1 = n;
  const mp = (m + MR - 1) / MR;
  const np = (n + NR - 1) / NR;
  if (np >= mp) {
    const per = (np + nthreads - 1) / nthreads;
    n0 = min(n, tid * per * NR);
    n1 = min(n, (tid + 1) * per * NR);
  } else {
    const per = (mp + nthreads - 1) / nthreads;
    m0 = min(m, tid * per * MR);
    m1 = min(m, (tid + 1) * per * MR);
  }
  if (m0 >= m1 || n0 >= n1) return;
  if (k == 0) {
    for (let i = m0; i < m1; i++)
      for (let j = n0; j < n1; j++) store<f32>(c + (<usize>(i * ldc + j) << 2), 0);
    return;
  }
  const bp = scratch + <usize>tid * scratchBytes;
  const tile = bp + (<usize>(KC * NC) << 2);
  const rowStep = <usize>sai << 2;
  const kStep = <usize>sak << 2;
  for (let jc = n0; jc < n1; jc += NC) {
    const nc = min(NC, n1 - jc);
    for (let pc = 0; pc < k; pc += KC) {
      const kc = min(KC, k - pc);
      packB(bp, b, pc, jc, kc, nc, sbk, sbj);
      for (let ic = m0; ic < m1; ic += MC) {
        const mc = min(MC, m1 - ic);
        for (let jr = 0; jr < nc; jr += NR) {
          const bpan = bp + (<usize>(jr * kc) << 2);
          for (let ir = 0; ir < mc; ir += MR) {
            const cp = c + (<usize>((ic + ir) * ldc + jc + jr) << 2);
            const ar = a + (<usize>((ic + ir) * sai + pc * sak) << 2);
            micro(ar, rowStep, kStep, bpan, kc, cp, ldc, pc == 0, min(MR, mc - ir), min(NR, nc - jr), tile);
          }
        }
      }
    }
  }
}

/**
 * `gemm` with B stored as bf16 (kind 1) or f16 (kind 2) words, A and C f32: B's elements are widened while its
 * panels are packed (`packHalfB`); the split among threads, the blocking and the micro-kernel are gemm's. (A copy
 * of gemm's driver rather than a shared one with a kind argument: gemm's compiled code stays what it was.)
 */
export function gemmHalfB(
  a: usize, b: usize, c: usize, m: i32, n: i32, k: i32, sai: i32, sak: i32, sbk: i32, sbj: i32, ldc: i32,
  scratch: usize, scratchBytes: usize, kind: i32, tid: i32, nthreads: i32,
): void {
  let m0 = 0, m1 = m, n0 = 0, n1 = n;
  const mp = (m + MR - 1) / MR;
  const np = (n + NR - 1) / NR;
  if (np >= mp) {
    const per = (np + nthreads - 1) / nthreads;
    n0 = min(n, tid * per * NR);
    n1 = min(n, (tid + 1) * per * NR);
  } else {
    const per = (mp + nthreads - 1) / nthreads;
    m0 = min(m, tid * per * MR);
    m1 = min(m, (tid + 1) * per * MR);
  }
  if (m0 >= m1 || n0 >= n1) return;
  if (k == 0) {
    for (let i = m0; i < m1; i++)
      for (let j = n0; j < n1; j++) store<f32>(c + (<usize>(i * ldc + j) << 2), 0);
    return;
  }
  const bp = scratch + <usize>tid * scratchBytes;
  const tile = bp + (<usize>(KC * NC) << 2);
  const rowStep = <usize>sai << 2;
  const kStep = <usize>sak << 2;
  for (let jc = n0; jc < n1; jc += NC) {
    const nc = min(NC, n1 - jc);
    for (let pc = 0; pc < k; pc += KC) {
      const kc = min(KC, k - pc);
      packHalfB(bp, b, pc, jc, kc, nc, sbk, sbj, kind);
      for (let ic = m0; ic < m1; ic += MC) {
        const mc = min(MC, m1 - ic);
        for (let jr = 0; jr < nc; jr += NR) {
          const bpan = bp + (<usize>(jr * kc) << 2);
          for (let ir = 0; ir < mc; ir += MR) {
            const cp = c + (<usize>((ic + ir) * ldc + jc + jr) << 2);
            const ar = a + (<usize>((ic + ir) * sai + pc * sak) << 2);
            micro(ar, rowStep, kStep, bpan, kc, cp, ldc, pc == 0, min(MR, mc - ir), min(NR, nc - jr), tile);
          }
        }
      }
    }
  }
}
