import type { KernelTensor } from '../../../core/backend.js';
import type { DType } from '../../../core/dtype.js';
import { broadcastStrides, sizeOf, stridesOf, type Shape } from '../../../core/shape.js';
import copySrc from '../../../../shaders/copy.wgsl';
import fillSrc from '../../../../shaders/fill.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { checkRank, collapse, Words } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';

/** Movement kernels on 32-bit words: fill, and one strided copy for expand, permute, slice, pad and concat. */

const bitsOf = (dtype: DType, value: number): number => {
  const w = new Words(1);
  if (dtype === 'i32') w.i(0, value);
  else w.f(0, value);
  return w.u32[0]!;
};

/** Fill the first `n` words of `out` (a buffer, or a byte count to allocate) with `value`; returns the buffer. */
export function fillInto(rt: GpuRuntime, out: GPUBuffer | number, n: number, dtype: DType, value: number): GPUBuffer {
  wgslType('fill', dtype);
  const [filled] = launchSpec(rt, {
    kernel: 'fill',
    source: () => fillSrc,
    inputs: [],
    outputs: [out],
    grid: { threads: n, workgroupSize: 256 },
    uniforms: ([gx]) =>
      new Words(4)
        .u(0, n)
        .u(1, gx * 256)
        .u(2, bitsOf(dtype, value)).u32,
  });
  return filled;
}

export function fill(rt: GpuRuntime, shape: Shape, dtype: DType, value: number): GPUBuffer {
  const n = sizeOf(shape);
  return fillInto(rt, n * 4, n, dtype, value);
}

/**
 * dst[dstOff + c . dstStrides] = src[srcOff + c . srcStrides] for every coordinate c of `shape`; `dst` is a
 * buffer to write into or a byte count to allocate. Returns the destination.
 */
export function copyStrided(
  rt: GpuRuntime,
  kernel: string,
  src: GPUBuffer,
  dst: GPUBuffer | number,
  shape: Shape,
  srcStrides: readonly number[],
  srcOffset: number,
  dstStrides: readonly number[],
  dstOffset: number,
): GPUBuffer {
  const n = sizeOf(shape);
  const c = collapse(shape, [srcStrides, dstStrides]);
  checkRank(kernel, c.shape.length);
  const rank = c.shape.length;
  const [out] = launchSpec(rt, {
    kernel,
    key: `copy:r${rank}`,
    source: () => fillTemplate('copy.wgsl', copySrc, { RANK: rank }),
    inputs: [src],
    outputs: [dst],
    grid: { threads: n, workgroupSize: 256 },
    uniforms: ([gx]) =>
      new Words(28)
        .list(0, [n, gx * 256, srcOffset, dstOffset])
        .list(4, c.shape)
        .list(12, c.strides[0]!)
        .list(20, c.strides[1]!).u32,
  });
  return out;
}

const checked = (op: string, x: KernelTensor): GPUBuffer => {
  wgslType(op, x.dtype);
  return bufferOf(x.storage);
};

export function expand(rt: GpuRuntime, x: KernelTensor, outShape: Shape): GPUBuffer {
  const src = checked('expand', x);
  const bytes = sizeOf(outShape) * 4;
  return copyStrided(
    rt,
    'expand',
    src,
    bytes,
    outShape,
    broadcastStrides(x.shape, outShape),
    0,
    stridesOf(outShape),
    0,
  );
}

export function permute(rt: GpuRuntime, x: KernelTensor, perm: readonly number[]): GPUBuffer {
  const src = checked('permute', x);
  const strides = stridesOf(x.shape);
  const outShape = perm.map((p) => x.shape[p]!);
  const bytes = sizeOf(outShape) * 4;
  return copyStrided(
    rt,
    'permute',
    src,
    bytes,
    outShape,
    perm.map((p) => strides[p]!),
    0,
    stridesOf(outShape),
    0,
  );
}

export function slice(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const src = checked('slice', x);
  const strides = stridesOf(x.shape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'slice', src, sizeOf(outShape) * 4, outShape, strides, offset, stridesOf(outShape), 0);
}

export function pad(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const src = checked('pad', x);
  const out = fill(rt, outShape, x.dtype, 0);
  const strides = stridesOf(outShape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'pad', src, out, x.shape, stridesOf(x.shape), 0, strides, offset);
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

/**
 * dst with src written at `begin`: in place (dst's own buffer, one copy of src's words), or into a new buffer
 * (dst copied first, dst left as it was).
 */
export function updateSlice(
  rt: GpuRuntime,
  dst: KernelTensor,
  src: KernelTensor,
  begin: readonly number[],
  inPlace: boolean,
): GPUBuffer {
  const from = checked('updateSlice', src);
  const base = checked('updateSlice', dst);
  const n = sizeOf(dst.shape);
  const out = inPlace ? base : copyStrided(rt, 'updateSlice', base, n * 4, [n], [1], 0, [1], 0);
  const strides = stridesOf(dst.shape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'updateSlice', from, out, src.shape, stridesOf(src.shape), 0, strides, offset);
}

registerKernels<GpuBackend>('webgpu', {
  fill: (b, shape, dtype, value) => asStorage(fill(b.runtime, shape, dtype, value)),
  expand: (b, x, outShape) => asStorage(expand(b.runtime, x, outShape)),
  permute: (b, x, perm) => asStorage(permute(b.runtime, x, perm)),
  slice: (b, x, begin, outShape) => asStorage(slice(b.runtime, x, begin, outShape)),
  pad: (b, x, begin, outShape) => asStorage(pad(b.runtime, x, begin, outShape)),
  concat: (b, xs, axis, outShape) => asStorage(concat(b.runtime, xs, axis, outShape)),
  updateSlice: (b, dst, src, begin, inPlace) => {
    const out = updateSlice(b.runtime, dst, src, begin, inPlace);
    return inPlace ? dst.storage : asStorage(out);
  },
});
