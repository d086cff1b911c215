import type { KernelTensor } from '../../../core/backend.js';
import { sizeOf } from '../../../core/shape.js';
import layerNormSrc from '../../../../shaders/layer_norm.wgsl';
import layerNormBackwardSrc from '../../../../shaders/layer_norm_backward.wgsl';
import rmsNormSrc from '../../../../shaders/rms_norm.wgsl';
import rmsNormBackwardSrc from '../../../../shaders/rms_norm_backward.wgsl';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import columnSumsSrc from '../../../../shaders/column_sums.wgsl';
import normRows from '../../../../shaders/norm_rows.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, checkInputs, defineProgram, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillInto } from './movement.js';
import { ROW_WORKGROUPS, rowWorkgroup } from './rows.js';
import { registerKernels } from '../../../core/kernels.js';

/**
 * RMSNorm and LayerNorm over the last axis: a forward kernel (one workgroup per row), and a backward in two
 * dispatches: per-row dx saving the row statistics, then per-column dweight (and dbias) sums reading them.
 * addRmsNorm (kernels/fused.ts) shares their uniform record.
 */
export const NORM_UNIFORMS = { rows: 'u32', d: 'u32', eps: 'f32', grid_x: 'u32' } as const;

const withRows = (src: string): string => `${rowReduce}\n${normRows}\n${src}`;

const RMS_NORM = (wg: number): Program =>
  cachedProgram(`rmsNorm:${wg}`, () => ({
    name: 'rmsNorm',
    inputs: { x: 'f32', w: 'f32' },
    outputs: { y: 'f32' },
    uniforms: NORM_UNIFORMS,
    workgroupSize: wg,
    body: withRows(rmsNormSrc),
    entryPoints: ['rms_norm'],
  }));

/**
 * Rows first (dx, and each row's statistic saved in `stats`); `COLUMN_SUMS` then sums dw reading them. With
 * `prior` the program also binds the cotangent x gathered before and adds it to dx.
 */
const RMS_NORM_BACKWARD = (wg: number, prior = false): Program =>
  cachedProgram(`rmsNormBackward:${wg}${prior ? ':prior' : ''}`, () => ({
    name: 'rmsNormBackward',
    inputs: { x: 'f32', w: 'f32', dy: 'f32', ...(prior ? { prior: 'f32' as const } : {}) },
    outputs: { dx: 'f32', dw: 'f32', stats: 'f32' },
    uniforms: NORM_UNIFORMS,
    workgroupSize: wg,
    body: withRows(
      fillTemplate('rms_norm_backward.wgsl', rmsNormBackwardSrc, { PRIOR: prior ? ' + prior[base + j]' : '' }),
    ),
    entryPoints: ['rms_norm_backward_rows'],
  }));

/** RMSNorm's weight gradient from the rows pass's statistics, in row chunks (column_sums.wgsl). */
const COLUMN_SUMS = defineProgram({
  name: 'rmsNormBackward',
  key: 'rmsNormBackward:columns',
  inputs: { dy: 'f32', x: 'f32', stats: 'f32' },
  outputs: { partials: 'f32', dw: 'f32' },
  uniforms: { rows: 'u32', d: 'u32', chunk: 'u32', chunks: 'u32' },
  workgroupSize: [32, 8, 1],
  body: columnSumsSrc,
  entryPoints: ['partial', 'total'],
});
/** Rows a chunk of the column sums covers: 32 per lane. */
const COLUMN_CHUNK = 256;

const LAYER_NORM = (wg: number): Program =>
  cachedProgram(`layerNorm:${wg}`, () => ({
    name: 'layerNorm',
    inputs: { x: 'f32', w: 'f32', b: 'f32' },
    outputs: { y: 'f32' },
    uniforms: NORM_UNIFORMS,
    workgroupSize: wg,
    body: withRows(layerNormSrc),
    entryPoints: ['layer_norm'],
  }));

const LAYER_NORM_BACKWARD = (wg: number): Program =>
  cachedProgram(`layerNormBackward:${wg}`, () => ({
    name: 'layerNormBackward',
    inputs: { x: 'f32', w: 'f32', dy: 'f32' },
    outputs: { dx: 'f32', dw: 'f32', db: 'f32', stats: 'f32' },
    uniforms: NORM_UNIFORMS,
    workgroupSize: wg,
    body: withRows(layerNormBackwardSrc),
    entryPoints: ['layer_norm_backward_rows', 'layer_norm_backward_cols'],
  }));

/** [rows, d] of the last axis (d of 0 means no rows). */
function rowsOf(x: KernelTensor): [rows: number, d: number] {
  const d = x.shape[x.shape.length - 1] ?? 1;
  return [d === 0 ? 0 : sizeOf(x.shape) / d, d];
}

export function rmsNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf(x);
  const call = {
    inputs: [x, w],
    outputs: [rows * d * 4] as const,
    grid: { workgroups: d === 0 ? 0 : rows },
    uniforms: { rows, d, eps },
  };
  const [y] = launch(rt, RMS_NORM(rowWorkgroup(rt, RMS_NORM, call, rows, d)), call);
  return y;
}

export function rmsNormBackward(
  rt: GpuRuntime,
  x: KernelTensor,
  w: KernelTensor,
  dy: KernelTensor,
  eps: number,
  prior: KernelTensor | null = null,
): [GPUBuffer, GPUBuffer] {
  const [rows, d] = rowsOf(x);
  const inputs = prior ? [x, w, dy, prior] : [x, w, dy];
  const withPrior = (wg: number): Program => RMS_NORM_BACKWARD(wg, prior !== null);
  checkInputs(withPrior(ROW_WORKGROUPS[0]), 'rmsNormBackward', inputs);
  if (rows * d === 0) return [rt.alloc(rows * d * 4), fillInto(rt, d * 4, d, 'f32', 0)];
  const uniforms = { rows, d, eps };
  const byRow = {
    entryPoint: 'rms_norm_backward_rows',
    inputs,
    outputs: [rows * d * 4, d * 4, rows * 4] as const,
    grid: { workgroups: rows },
    uniforms,
  };
  const program = withPrior(rowWorkgroup(rt, withPrior, byRow, rows, d, [0, 2]));
  const [dx, dw, stats] = launch(rt, program, byRow);
  const chunks = Math.ceil(rows / COLUMN_CHUNK);
  const sums = { inputs: [dy, x, stats], uniforms: { rows, d, chunk: COLUMN_CHUNK, chunks } };
  const [partials] = launch(rt, COLUMN_SUMS, {
    ...sums,
    entryPoint: 'partial',
    outputs: [chunks * d * 4, dw] as const,
    grid: { workgroups: [Math.ceil(d / 32), chunks, 1] },
  });
  launch(rt, COLUMN_SUMS, {
    ...sums,
    entryPoint: 'total',
    outputs: [partials, dw],
    grid: { workgroups: [Math.ceil(d / 256), 1, 1] },
  });
  rt.release(stats);
  rt.release(partials);
  return [dx, dw];
}

export function layerNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, b: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf(x);
  const call = {
    inputs: [x, w, b],
    outputs: [rows * d * 4] as const,
    grid: { workgroups: d === 0 ? 0 : rows },
    uniforms: { rows, d, eps },
  };
  const [y] = launch(rt, LAYER_NORM(rowWorkgroup(rt, LAYER_NORM, call, rows, d)), call);
  return y;
}

export function layerNormBackward(
  rt: GpuRuntime,
  x: KernelTensor,
  w: KernelTensor,
  dy: KernelTensor,
  eps: number,
): [GPUBuffer, GPUBuffer, GPUBuffer] {
  const [rows, d] = rowsOf(x);
  const inputs = [x, w, dy];
  checkInputs(LAYER_NORM_BACKWARD(ROW_WORKGROUPS[0]), 'layerNormBackward', inputs);
  if (rows * d === 0) {
    return [rt.alloc(rows * d * 4), fillInto(rt, d * 4, d, 'f32', 0), fillInto(rt, d * 4, d, 'f32', 0)];
  }
  const uniforms = { rows, d, eps };
  const byRow = {
    entryPoint: 'layer_norm_backward_rows',
    inputs,
    outputs: [rows * d * 4, d * 4, d * 4, rows * 8] as const,
    grid: { workgroups: rows },
    uniforms,
  };
  const program = LAYER_NORM_BACKWARD(rowWorkgroup(rt, LAYER_NORM_BACKWARD, byRow, rows, d, [0, 3]));
  const [dx, dw, db, stats] = launch(rt, program, byRow);
  launch(rt, program, {
    entryPoint: 'layer_norm_backward_cols',
    inputs,
    outputs: [dx, dw, db, stats],
    grid: { threads: d },
    uniforms,
  });
  rt.release(stats);
  return [dx, dw, db];
}

registerKernels<GpuBackend>('webgpu', {
  rmsNorm: (b, x, weight, eps) => asStorage(rmsNorm(b.runtime, x, weight, eps)),
  rmsNormBackward: (b, x, weight, dy, eps, prior) => {
    const [dx, dw] = rmsNormBackward(b.runtime, x, weight, dy, eps, prior);
    return [asStorage(dx), asStorage(dw)];
  },
  layerNorm: (b, x, weight, bias, eps) => asStorage(layerNorm(b.runtime, x, weight, bias, eps)),
  layerNormBackward: (b, x, weight, dy, eps) => {
    const [dx, dw, db] = layerNormBackward(b.runtime, x, weight, dy, eps);
    return [asStorage(dx), asStorage(dw), asStorage(db)];
  },
});
