import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import layerNormSrc from '../../../../shaders/layer_norm.wgsl';
import layerNormBackwardSrc from '../../../../shaders/layer_norm_backward.wgsl';
import rmsNormSrc from '../../../../shaders/rms_norm.wgsl';
import rmsNormBackwardSrc from '../../../../shaders/rms_norm_backward.wgsl';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import normRows from '../../../../shaders/norm_rows.wgsl';
import type { GpuRuntime } from '../runtime.js';
import { bufferOf } from '../storage.js';
import { grid } from '../wgsl.js';
import { fillInto } from './movement.js';
import { Words } from './layout.js';

/**
 * RMSNorm and LayerNorm over the last axis: a forward kernel (one workgroup per row), and a backward in two
 * dispatches: per-row dx saving the row statistics, then per-column dweight (and dbias) sums reading them.
 */
function rowsOf(kernel: string, x: KernelTensor): [rows: number, d: number] {
  if (x.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${x.dtype}`);
  const d = x.shape[x.shape.length - 1] ?? 1;
  return [d === 0 ? 0 : sizeOf(x.shape) / d, d];
}

const params = (rows: number, d: number, eps: number, gx: number): Uint32Array => new Words(4).u(0, rows).u(1, d).f(2, eps).u(3, gx).u32;
const withRows = (src: string) => (): string => `${rowReduce}\n${normRows}\n${src}`;

export function rmsNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf('rmsNorm', x);
  const y = rt.alloc(rows * d * 4);
  if (rows * d === 0) return y;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'rmsNorm',
    key: 'rms_norm',
    entryPoint: 'rms_norm',
    bindings: ['read', 'read', 'write', 'uniform'],
    source: withRows(rmsNormSrc),
    buffers: [bufferOf(x.storage), bufferOf(w.storage), y],
    uniforms: params(rows, d, eps, gx),
    workgroups: [gx, gy, gz],
  });
  return y;
}

export function rmsNormBackward(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, dy: KernelTensor, eps: number): [GPUBuffer, GPUBuffer] {
  const [rows, d] = rowsOf('rmsNormBackward', x);
  const dx = rt.alloc(rows * d * 4);
  const dw = rt.alloc(d * 4);
  if (rows * d === 0) {
    fillInto(rt, dw, d, 'f32', 0);
    return [dx, dw];
  }
  const stats = rt.alloc(rows * 4);
  const buffers = [bufferOf(x.storage), bufferOf(w.storage), bufferOf(dy.storage), dx, dw, stats];
  const bindings = ['read', 'read', 'read', 'write', 'write', 'write', 'uniform'] as const;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  const common = { bindings, source: withRows(rmsNormBackwardSrc), buffers, uniforms: params(rows, d, eps, gx) };
  rt.dispatch({ ...common, kernel: 'rmsNormBackward', key: 'rms_norm_backward:rows', entryPoint: 'rms_norm_backward_rows', workgroups: [gx, gy, gz] });
  rt.dispatch({ ...common, kernel: 'rmsNormBackward', key: 'rms_norm_backward:cols', entryPoint: 'rms_norm_backward_cols', workgroups: [Math.ceil(d / 64), 1, 1] });
  rt.release(stats);
  return [dx, dw];
}

export function layerNorm(rt: GpuRuntime, x: KernelTensor, w: KernelTensor, b: KernelTensor, eps: number): GPUBuffer {
  const [rows, d] = rowsOf('layerNorm', x);
  const y = rt.alloc(rows * d * 4);
  if (rows * d === 0) return y;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'layerNorm',
    key: 'layer_norm',
    entryPoint: 'layer_norm',
    bindings: ['read', 'read', 'read', 'write', 'uniform'],
    source: withRows(layerNormSrc),
    buffers: [bufferOf(x.storage), bufferOf(w.storage), bufferOf(b.storage), y],
    uniforms: params(rows, d, eps, gx),
    workgroups: [gx, gy, gz],
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
  const dx = rt.alloc(rows * d * 4);
  const dw = rt.alloc(d * 4);
  const db = rt.alloc(d * 4);
  if (rows * d === 0) {
    fillInto(rt, dw, d, 'f32', 0);
    fillInto(rt, db, d, 'f32', 0);
    return [dx, dw, db];
  }
  const stats = rt.alloc(rows * 8);
  const buffers = [bufferOf(x.storage), bufferOf(w.storage), bufferOf(dy.storage), dx, dw, db, stats];
  const bindings = ['read', 'read', 'read', 'write', 'write', 'write', 'write', 'uniform'] as const;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  const common = { bindings, source: withRows(layerNormBackwardSrc), buffers, uniforms: params(rows, d, eps, gx) };
  rt.dispatch({ ...common, kernel: 'layerNormBackward', key: 'layer_norm_backward:rows', entryPoint: 'layer_norm_backward_rows', workgroups: [gx, gy, gz] });
  rt.dispatch({ ...common, kernel: 'layerNormBackward', key: 'layer_norm_backward:cols', entryPoint: 'layer_norm_backward_cols', workgroups: [Math.ceil(d / 64), 1, 1] });
  rt.release(stats);
  return [dx, dw, db];
}
