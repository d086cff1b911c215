/**
 * How bench:gpu prints where a step's time goes (the runtime's timeline, `src/backends/webgpu/timeline.ts`) and
 * the kernels that take the most GPU time (the per-kernel profiler), and the runtime configurations it compares.
 */
import type { KernelTime, TimelineReport, WebGpuBackendOptions } from '../../src/index.js';

/**
 * Runtime configurations `--variants` compares, each its own device where Dawn toggles differ: `base` is what
 * ran on 2026-11-26 (32 dispatches a submit, error scopes around each submit, validation and robustness on);
 * the others change one thing each; `every-cut` takes each change the H100's timelines of 2026-11-28 showed
 * helping or neutral (fewer error scopes, the fast toggles), not the larger batches of submits, which left the
 * device idle while the host encoded; `default` is the library's defaults as they are now.
 */
export const GPU_VARIANTS = {
  base: { dispatchesPerSubmit: 32, errorScopes: 'submit', fast: false },
  'submit-128': { dispatchesPerSubmit: 128, errorScopes: 'submit', fast: false },
  'submit-at-read': { dispatchesPerSubmit: 1_000_000, errorScopes: 'submit', fast: false },
  'scopes-per-read': { dispatchesPerSubmit: 32, errorScopes: 'read', fast: false },
  fast: { dispatchesPerSubmit: 32, errorScopes: 'submit', fast: true },
  'every-cut': { dispatchesPerSubmit: 32, errorScopes: 'read', fast: true },
  default: {},
  // The library's defaults, the step recorded once and replayed (recordStep): step tasks only.
  replayed: {},
} as const satisfies Record<string, WebGpuBackendOptions>;

export type GpuVariant = keyof typeof GPU_VARIANTS;

const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const pct = (part: number, whole: number): string => `${((100 * part) / whole).toFixed(0)}%`;

/**
 * The timeline of one step, as a few lines; `hostCpuMs`, the process's CPU time over the span (all its threads),
 * tells a host that waits from one that polls while it waits.
 */
export function timelineLines(label: string, r: TimelineReport, hostCpuMs?: number): string[] {
  const js = Math.max(0, r.untilLastSubmitMs - r.encodeMs - r.submitMs);
  const per = (x: number): string => `${((1000 * x) / Math.max(1, r.dispatches)).toFixed(1)} us`;
  const lines = [
    `timeline ${label}: wall ${ms(r.wallMs)} ms; ${r.dispatches} dispatches, ${r.submits} submits, ${r.passes} ` +
      `compute passes (${(r.passes / Math.max(1, r.submits)).toFixed(2)} per submit), ${r.reads} read-back`,
    `  host: ${ms(r.untilLastSubmitMs)} ms until the last submit = JS ${ms(js)} (graph, autodiff, launch records) ` +
      `+ encode ${ms(r.encodeMs)} + submit ${ms(r.submitMs)} (the longest ${ms(r.longestSubmitMs)}); per dispatch ${per(r.untilLastSubmitMs)} ` +
      `(Dawn calls ${per(r.encodeMs + r.submitMs)}); read-back wait ${ms(r.readWaitMs)} ms` +
      (hostCpuMs === undefined ? '' : `; the process's CPU time over the step ${ms(hostCpuMs)} ms`),
  ];
  const g = r.gpu;
  if (g === null) lines.push(`  GPU: not measured (${r.gpuNote})`);
  else {
    const idle = Math.max(0, r.wallMs - g.busyMs);
    lines.push(
      `  GPU: busy ${ms(g.busyMs)} ms (${pct(g.busyMs, r.wallMs)} of the wall time; idle ${ms(idle)} ms = ` +
        `${pct(idle, r.wallMs)}); first pass to last ${ms(g.spanMs)} ms, gaps between passes of a submit ` +
        `${ms(g.idleInSubmitMs)} ms, between submits ${ms(g.idleBetweenSubmitsMs)} ms` +
        (r.gpuNote ? ` (${r.gpuNote})` : ''),
    );
  }
  return lines;
}

/** The ten kernels with the most GPU time in a profiled step, with their share of the profiled total. */
export function topKernelLines(label: string, times: readonly KernelTime[] | null, why: string): string[] {
  if (times === null || times.length === 0) return [`top kernels ${label}: not measured (${why})`];
  const total = times.reduce((s, t) => s + t.gpuMs, 0);
  const lines = [
    `top kernels ${label} (one profiled step, a pass per dispatch: ${ms(total)} ms of GPU time in ` +
      `${times.reduce((s, t) => s + t.dispatches, 0)} dispatches):`,
  ];
  for (const t of times.slice(0, 10))
    lines.push(
      `  ${t.kernel}: ${ms(t.gpuMs)} ms (${pct(t.gpuMs, total)}), ${t.dispatches} dispatches, ` +
        `${((1000 * t.gpuMs) / t.dispatches).toFixed(1)} us each`,
    );
  return lines;
}
