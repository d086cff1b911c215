/** The per-kernel table the WebGPU benchmarks print: dispatches per step, and GPU time when profiling. */
import type { WebGpuBackend } from '../../src/index.js';

export async function printKernelTable(g: WebGpuBackend, steps: number, top = 25): Promise<void> {
  await g.sync();
  const counts = [...g.runtime.kernelCounts()].sort((a, b) => b[1] - a[1]);
  const times = await g.runtime.kernelTimes();
  if (times) {
    const total = times.reduce((s, t) => s + t.gpuMs, 0);
    console.log(`GPU time per step by kernel (timestamp-query; ${(total / steps).toFixed(2)} ms/step in all):`);
    console.table(
      times.slice(0, top).map((t) => ({
        kernel: t.kernel,
        'dispatches/step': t.dispatches / steps,
        'GPU ms/step': +(t.gpuMs / steps).toFixed(3),
        share: `${((100 * t.gpuMs) / Math.max(total, 1e-9)).toFixed(1)}%`,
      })),
    );
  } else {
    const why = g.runtime.profiling
      ? ''
      : g.runtime.device.features.has('timestamp-query')
        ? ' (set RLVR_PROFILE=1)'
        : ' (the adapter has no timestamp-query)';
    console.log(`dispatches per step by kernel; no GPU times${why}:`);
    console.log(
      counts
        .slice(0, top)
        .map(([k, n]) => `${k} ${n / steps}`)
        .join(', '),
    );
  }
}
