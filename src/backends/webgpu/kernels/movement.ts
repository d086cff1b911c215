import type { KernelTensor } from '../../../core/backend.js';
import type { DType } from '../../../core/dtype.js';
import { broadcastStrides, sizeOf, stridesOf, type Shape } from '../../../core/shape.js';
import copySrc from '../../../../shaders/copy.wgsl';
import fillSrc from '../../../../shaders/fill.wgsl';
import type { GpuRuntime } from '../runtime.js';
import { bufferOf } from '../storage.js';
import { fillTemplate, grid, wgslType } from '../wgsl.js';
import { checkRank, collapse, Words } from './layout.js';

/** Movement kernels on 32-bit words: fill, and one strided copy for expand, permute, slice, pad and concat. */

const bitsOf = (dtype: DType, value: number): number => {
  const w = new Words(1);
  if (dtype === 'i32') w.i(0, value);
  else w.f(0, value);
  return w.u32[0]!;
};

export function fillInto(rt: GpuRuntime, out: GPUBuffer, n: number, dtype: DType, value: number): void {
  wgslType('fill', dtype);
  if (n === 0) return;
  const [gx, gy, gz] = grid(Math.ceil(n / 256), rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'fill',
    key: 'fill',
    bindings: ['write', 'uniform'],
    source: () => fillSrc,
    buffers: [out],
    uniforms: new Words(4).u(0, n).u(1, gx * 256).u(2, bitsOf(dtype, value)).u32,
    workgroups: [gx, gy, gz],
  });
}

export function fill(rt: GpuRuntime, shape: Shape, dtype: DType, value: number): GPUBuffer {
  const n = sizeOf(shape);
  const out = rt.alloc(n * 4);
  fillInto(rt, out, n, dtype, value);
  return out;
}

/** dst[dstOff + c . dstStrides] = src[srcOff + c . srcStrides] for every coordinate c of `shape`. */
export function copyStrided(
  rt: GpuRuntime,
  kernel: string,
  src: GPUBuffer,
  dst: GPUBuffer,
  shape: Shape,
  srcStrides: readonly number[],
  srcOffset: number,
  dstStrides: readonly number[],
  dstOffset: number,
): void {
  const n = sizeOf(shape);
  if (n === 0) return;
  const c = collapse(shape, [srcStrides, dstStrides]);
  checkRank(kernel, c.shape.length);
  const rank = c.shape.length;
  const [gx, gy, gz] = grid(Math.ceil(n / 256), rt.maxWorkgroupsPerDim);
  const words = new Words(28).u(0, n).u(1, gx * 256).u(2, srcOffset).u(3, dstOffset).list(4, c.shape).list(12, c.strides[0]!).list(20, c.strides[1]!);
  rt.dispatch({
    kernel,
    key: `copy:r${rank}`,
    bindings: ['read', 'write', 'uniform'],
    source: () => fillTemplate('copy.wgsl', copySrc, { RANK: rank }),
    buffers: [src, dst],
    uniforms: words.u32,
    workgroups: [gx, gy, gz],
  });
}

const checked = (op: string, x: KernelTensor): GPUBuffer => {
  wgslType(op, x.dtype);
  return bufferOf(x.storage);
};

export function expand(rt: GpuRuntime, x: KernelTensor, outShape: Shape): GPUBuffer {
  const src = checked('expand', x);
  const out = rt.alloc(sizeOf(outShape) * 4);
  copyStrided(rt, 'expand', src, out, outShape, broadcastStrides(x.shape, outShape), 0, stridesOf(outShape), 0);
  return out;
}

export function permute(rt: GpuRuntime, x: KernelTensor, perm: readonly number[]): GPUBuffer {
  const src = checked('permute', x);
  const strides = stridesOf(x.shape);
  const outShape = perm.map((p) => x.shape[p]!);
  const out = rt.alloc(sizeOf(outShape) * 4);
  copyStrided(rt, 'permute', src, out, outShape, perm.map((p) => strides[p]!), 0, stridesOf(outShape), 0);
  return out;
}

export function slice(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const src = checked('slice', x);
  const strides = stridesOf(x.shape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  const out = rt.alloc(sizeOf(outShape) * 4);
  copyStrided(rt, 'slice', src, out, outShape, strides, offset, stridesOf(outShape), 0);
  return out;
}

export function pad(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const src = checked('pad', x);
  const out = fill(rt, outShape, x.dtype, 0);
  const strides = stridesOf(outShape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  copyStrided(rt, 'pad', src, out, x.shape, stridesOf(x.shape), 0, strides, offset);
  return out;
}

export function concat(rt: GpuRuntime, xs: readonly KernelTensor[], axis: number, outShape: Shape): GPUBuffer {
  const srcs = xs.map((x) => checked('concat', x));
  const out = rt.alloc(sizeOf(outShape) * 4);
  const strides = stridesOf(outShape);
  let off = 0;
  xs.forEach((x, i) => {
    copyStrided(rt, 'concat', srcs[i]!, out, x.shape, stridesOf(x.shape), 0, strides, off * strides[axis]!);
    off += x.shape[axis]!;
  });
  return out;
}
