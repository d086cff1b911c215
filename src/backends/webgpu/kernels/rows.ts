import type { LaunchCall } from '../launch.js';
import type { Program } from '../program.js';
import type { GpuRuntime } from '../runtime.js';
import { agreeWithin, pickWorkgroup } from './tune.js';

/**
 * The workgroup size of the row kernels (one workgroup per row over row_reduce.wgsl's trees: softmax, RMSNorm,
 * LayerNorm and their backward rows, addRmsNorm, token log-probs), tuned per class of rows (tuner.ts): 64 (the
 * default; enough for a row of d <= 1024) or more threads a row, which a long row (Qwen3's 151,936 logits) and
 * few rows need to fill a GPU. Every size is a correctness case of rows.spec.ts and fused.spec.ts.
 */
export const ROW_WORKGROUPS = [64, 128, 256] as const;

let forced: number | null = null;
/** Force one workgroup size for every row kernel (the specs of each candidate); null restores the tuner's. */
export function setRowWorkgroupSize(wg: number | null): void {
  forced = wg;
}

/** Elements below which a row class is not tuned: launch overhead, not the kernel, is its cost. */
const TUNE_MIN_ELEMENTS = 2 ** 18;

const log2Class = (x: number): number => Math.ceil(Math.log2(Math.max(1, x)));

/**
 * The workgroup size for a row kernel's launch (`call`, with `programOf(wg)` its record at each size): a forced
 * one, else the tuner's pick (kernels/tune.ts) for the class: entry point, rows and row length by powers of
 * two. `written` names the outputs the entry point writes (default all: a backward's rows pass leaves dweight
 * to its columns pass).
 */
export function rowWorkgroup<O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  programOf: (wg: number) => Program,
  call: LaunchCall<O>,
  rows: number,
  len: number,
  written?: readonly number[],
): number {
  if (forced !== null) return forced;
  if (rows * len < TUNE_MIN_ELEMENTS) return ROW_WORKGROUPS[0];
  const entry = call.entryPoint ?? programOf(ROW_WORKGROUPS[0]).entryPoints[0];
  return pickWorkgroup(rt, {
    sizes: ROW_WORKGROUPS,
    programOf,
    call,
    shapeClass: `${entry}:r${log2Class(rows)}:n${log2Class(len)}`,
    // Another workgroup size sums a row in another order: an f32 rounding of the row's sums apart.
    agree: agreeWithin(1e-5, 1e-5),
    ...(written ? { written } : {}),
  });
}
