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

/** Flops one iteration of `maddThroughput` counts: 12 accumulators x 4 lanes x (multiply + add). */
export const MADD_THROUGHPUT_FLOPS: i32 = 96;
