// The machine's multiply-add ceiling for this build: 12 independent f32x4 accumulators (enough to hide the latency
// of a dependent add or fused multiply-add on current cores), each updated `iterations` times by `madd`, i.e.
// 96 flops per iteration. The plain build measures a multiply then an add, the relaxed one a fused multiply-add.
// bench:cpu divides each kernel's GFLOP/s by it.

import { madd } from './math';

export function maddThroughput(iterations: i32, tid: i32, nthreads: i32): f32 {
  const x = f32x4.splat(<f32>(0.999 + <f32>tid * 1e-7 + <f32>nthreads * 1e-9));
  const y = f32x4.splat(<f32>1e-3);
  let a0 = f32x4.splat(0), a1 = f32x4.splat(1), a2 = f32x4.splat(2), a3 = f32x4.splat(3);
  let a4 = f32x4.splat(4), a5 = f32x4.splat(5), a6 = f32x4.splat(6), a7 = f32x4.splat(7);
  let a8 = f32x4.splat(8), a9 = f32x4.splat(9), a10 = f32x4.splat(10), a11 = f32x4.splat(11);
  for (let i = 0; i < iterations; i++) {
    a0 = madd(a0, x, y); a1 = madd(a1, x, y); a2 = madd(a2, x, y); a3 = madd(a3, x, y);
    a4 = madd(a4, x, y); a5 = madd(a5, x, y); a6 = madd(a6, x, y); a7 = madd(a7, x, y);
    a8 = madd(a8, x, y); a9 = madd(a9, x, y); a10 = madd(a10, x, y); a11 = madd(a11, x, y);
  }
  const s = f32x4.add(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)), f32x4.add(f32x4.add(a4, a5), f32x4.add(a6, a7)));
  return f32x4.extract_lane(f32x4.add(s, f32x4.add(f32x4.add(a8, a9), f32x4.add(a10, a11))), 0);
}

// Accumulators as a GEMM's micro-kernel holds them: 10 of them, each entering only as the addend of a product of
// two values off its chain (acc_k += x * b_k, b_k loaded from memory as a packed panel is, x scaled each iteration
// so no product is loop-invariant). On a core with separate multiply and add pipes (AMD Zen) the chained loop
// above is bound by the multiply's latency, which a GEMM does not pay; and 12 accumulators plus 12 operands would
// not fit the 16 vector registers V8 allocates, so this one keeps its operands in memory, as a GEMM does.
const PANEL = memory.data<f32>([
  1e-3, 1e-3, 1e-3, 1e-3, 2e-3, 2e-3, 2e-3, 2e-3, 3e-3, 3e-3, 3e-3, 3e-3, 4e-3, 4e-3, 4e-3, 4e-3, 5e-3, 5e-3, 5e-3, 5e-3,
  6e-3, 6e-3, 6e-3, 6e-3, 7e-3, 7e-3, 7e-3, 7e-3, 8e-3, 8e-3, 8e-3, 8e-3, 9e-3, 9e-3, 9e-3, 9e-3, 1e-2, 1e-2, 1e-2, 1e-2,
]);

export function maddAddendThroughput(iterations: i32, tid: i32, nthreads: i32): f32 {
  let x = f32x4.splat(<f32>(0.999 + <f32>tid * 1e-7 + <f32>nthreads * 1e-9));
  const scale = f32x4.splat(<f32>0.9999999);
  let a0 = f32x4.splat(0), a1 = f32x4.splat(1), a2 = f32x4.splat(2), a3 = f32x4.splat(3), a4 = f32x4.splat(4);
  let a5 = f32x4.splat(5), a6 = f32x4.splat(6), a7 = f32x4.splat(7), a8 = f32x4.splat(8), a9 = f32x4.splat(9);
  for (let i = 0; i < iterations; i++) {
    x = f32x4.mul(x, scale);
    a0 = madd(x, v128.load(PANEL, 0), a0); a1 = madd(x, v128.load(PANEL, 16), a1);
    a2 = madd(x, v128.load(PANEL, 32), a2); a3 = madd(x, v128.load(PANEL, 48), a3);
    a4 = madd(x, v128.load(PANEL, 64), a4); a5 = madd(x, v128.load(PANEL, 80), a5);
    a6 = madd(x, v128.load(PANEL, 96), a6); a7 = madd(x, v128.load(PANEL, 112), a7);
    a8 = madd(x, v128.load(PANEL, 128), a8); a9 = madd(x, v128.load(PANEL, 144), a9);
  }
  const s = f32x4.add(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)), f32x4.add(f32x4.add(a4, a5), f32x4.add(a6, a7)));
  return f32x4.extract_lane(f32x4.add(s, f32x4.add(a8, a9)), 0);
}

/** Flops one iteration of `maddAddendThroughput` counts: 10 accumulators x 4 lanes x (multiply + add). */
export const MADD_ADDEND_FLOPS: i32 = 80;

/** Flops one iteration of `maddThroughput` counts: 12 accumulators x 4 lanes x (multiply + add). */
export const MADD_THROUGHPUT_FLOPS: i32 = 96;
