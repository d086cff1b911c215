import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import layerNormSrc from '../../../../shaders/layer_norm.wgsl';
import layerNormBackwardSrc from '../../../../shaders/layer_norm_backward.wgsl';
import rmsNormSrc from '../../../../shaders/rms_norm.wgsl';
import rmsNormBackwardSrc from '../../../../shaders/rms_norm_backward.wgsl';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import normRows from '../../../../shaders/norm_rows.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { grid } from '../wgsl.js';
import { fillInto } from './movement.js';
import { Words } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';

/**
 * RMSNorm and LayerNorm over the last axis: a forward kernel (one workgroup per row), and a backward in two
 * dispatches: per-row dx saving the row statistics, then per-column dweight (and dbias) sums reading them.
 */
function rowsOf(kernel: string, x: KernelTensor): [rows: number, d: number] {
  if (x.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${x.dtype}`);
  const d = x.shape[x.shape.length - 1] ?? 1;
  return [d === 0 ? 0 : sizeOf(x.shape) / d, d];
}

const params =
  (rows: number, d: number, eps: number) =>
  ([gx]: readonly number[]): Uint32Array =>
    new Words(4)
      .u(0, rows)
      .u(1, d)
      .f(2, eps)
      .u(3, gx ?? 0).u32;
/** One workgroup per row. */
const perRow = (rows: number): { threads: number; workgroupSize: number } => ({ threads: rows, workgroupSize: 1 });
const withRows = (src: string) => (): string => `${rowReduce}\n${normRows}\n${src}`;

export function rmsNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf('rmsNorm', x);
  const [y] = launchSpec(rt, {
    kernel: 'rmsNorm',
    key: 'rms_norm',
    entryPoint: 'rms_norm',
    source: withRows(rmsNormSrc),
    inputs: [bufferOf(x.storage), bufferOf(w.storage)],
    outputs: [rows * d * 4],
    grid: perRow(d === 0 ? 0 : rows),
    uniforms: params(rows, d, eps),
  });
  return y;
}

export function rmsNormBackward(
  rt: GpuRuntime,
  x: KernelTensor,
  w: KernelTensor,
  dy: KernelTensor,
  eps: number,
): [GPUBuffer, GPUBuffer] {
  const [rows, d] = rowsOf('rmsNormBackward', x);
  if (rows * d === 0) return [rt.alloc(rows * d * 4), fillInto(rt, d * 4, d, 'f32', 0)];
  const inputs = [bufferOf(x.storage), bufferOf(w.storage), bufferOf(dy.storage)];
  const common = {
    kernel: 'rmsNormBackward',
    source: withRows(rmsNormBackwardSrc),
    inputs,
    uniforms: params(rows, d, eps),
  };
  // Rows first (dx, and each row's statistic saved in `stats`), then columns (dw) reading the statistics.
  const [dx, dw, stats] = launchSpec(rt, {
    ...common,
    key: 'rms_norm_backward:rows',
    entryPoint: 'rms_norm_backward_rows',
    outputs: [rows * d * 4, d * 4, rows * 4],
    grid: perRow(rows),
  });
  launchSpec(rt, {
    ...common,
    key: 'rms_norm_backward:cols',
    entryPoint: 'rms_norm_backward_cols',
    outputs: [dx, dw, stats],
    grid: { threads: d, workgroupSize: 64 },
    uniforms: params(rows, d, eps)(grid(rows, rt.maxWorkgroupsPerDim)),
  });
  rt.release(stats);
  return [dx, dw];
}

export function layerNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, b: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf('layerNorm', x);
  const [y] = launchSpec(rt, {
    kernel: 'layerNorm',
    key: 'layer_norm',
    entryPoint: 'layer_norm',
    source: withRows(layerNormSrc),
    inputs: [bufferOf(x.storage), bufferOf(w.storage), bufferOf(b.storage)],
    outputs: [rows * d * 4],
    grid: perRow(d === 0 ? 0 : rows),
    uniforms: params(rows, d, eps),
  });
  return y;
}

export function layerNormBackward(
  rt: GpuRuntime,
  x: KernelTensor,
  w: KernelTensor,
  dy: KernelTensor,
  eps: number,
): [GPUBuffer, GPUBuffer, GPUBuffer] {
  const [rows, d] = rowsOf('layerNormBackward', x);
  if (rows * d === 0) {
    return [rt.alloc(rows * d * 4), fillInto(rt, d * 4, d, 'f32', 0), fillInto(rt, d * 4, d, 'f32', 0)];
  }
  const inputs = [bufferOf(x.storage), bufferOf(w.storage), bufferOf(dy.storage)];
  const common = {
    kernel: 'layerNormBackward',
    source: withRows(layerNormBackwardSrc),
    inputs,
    uniforms: params(rows, d, eps),
  };
  const [dx, dw, db, stats] = launchSpec(rt, {
    ...common,
    key: 'layer_norm_backward:rows',
    entryPoint: 'layer_norm_backward_rows',
    outputs: [rows * d * 4, d * 4, d * 4, rows * 8],
    grid: perRow(rows),
  });
  launchSpec(rt, {
    ...common,
    key: 'layer_norm_backward:cols',
    entryPoint: 'layer_norm_backward_cols',
    outputs: [dx, dw, db, stats],
    grid: { threads: d, workgroupSize: 64 },
    uniforms: params(rows, d, eps)(grid(rows, rt.maxWorkgroupsPerDim)),
  });
  rt.release(stats);
  return [dx, dw, db];
}

registerKernels<GpuBackend>('webgpu', {
  rmsNorm: (b, x, weight, eps) => asStorage(rmsNorm(b.runtime, x, weight, eps)),
  rmsNormBackward: (b, x, weight, dy, eps) => {
    const [dx, dw] = rmsNormBackward(b.runtime, x, weight, dy, eps);
    return [asStorage(dx), asStorage(dw)];
  },
  layerNorm: (b, x, weight, bias, eps) => asStorage(layerNorm(b.runtime, x, weight, bias, eps)),
  layerNormBackward: (b, x, weight, dy, eps) => {
    const [dx, dw, db] = layerNormBackward(b.runtime, x, weight, dy, eps);
    return [asStorage(dx), asStorage(dw), asStorage(db)];
  },
});
