import type { KernelTensor } from '../../../core/backend.js';
import type { DType } from '../../../core/dtype.js';
import { broadcastStrides, sizeOf, stridesOf, type Shape } from '../../../core/shape.js';
import copySrc from '../../../../shaders/copy.wgsl';
import fillSrc from '../../../../shaders/fill.wgsl';
import { launch } from '../launch.js';
import { bitsOf, cachedProgram, defineProgram, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { checkRank, collapse } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';

/** Movement kernels on 32-bit words: fill, and one strided copy for expand, permute, slice, pad and concat. */

const FILL = defineProgram({
  name: 'fill',
  inputs: {},
  outputs: { out: 'u32' },
  uniforms: { n: 'u32', grid_x: 'u32', bits: 'u32' },
  workgroupSize: 256,
  body: fillSrc,
});

/** Fill the first `n` words of `out` (a buffer, or a byte count to allocate) with `value`; returns the buffer. */
export function fillInto(rt: GpuRuntime, out: GPUBuffer | number, n: number, dtype: DType, value: number): GPUBuffer {
  const [filled] = launch(rt, FILL, {
    inputs: [],
    outputs: [out],
    grid: { threads: n },
    uniforms: { n, bits: bitsOf(wgslType('fill', dtype), value) },
  });
  return filled;
}

export function fill(rt: GpuRuntime, shape: Shape, dtype: DType, value: number): GPUBuffer {
  const n = sizeOf(shape);
  return fillInto(rt, n * 4, n, dtype, value);
}

/** The strided copy of an iteration shape of `rank` dims (after merging contiguous ones). */
export const copyProgram = (rank: number): Program =>
  cachedProgram(`copy:r${rank}`, () => ({
    name: 'copy',
    inputs: { src: 'u32' },
    outputs: { dst: 'u32' },
    uniforms: {
      n: 'u32',
      grid_x: 'u32',
      src_offset: 'u32',
      dst_offset: 'u32',
      shape: 'array<vec4<u32>, 2>',
      src_strides: 'array<vec4<u32>, 2>',
      dst_strides: 'array<vec4<u32>, 2>',
    },
    workgroupSize: 256,
    body: fillTemplate('copy.wgsl', copySrc, { RANK: rank }),
  }));

/**
 * dst[dstOff + c . dstStrides] = src[srcOff + c . srcStrides] for every coordinate c of `shape`; `src` is a
 * tensor (any 32-bit dtype) or a launcher's buffer, `dst` a buffer to write into or a byte count to allocate.
 * Returns the destination.
 */
export function copyStrided(
  rt: GpuRuntime,
  kernel: string,
  src: KernelTensor | GPUBuffer,
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
  const [out] = launch(rt, copyProgram(c.shape.length), {
    kernel,
    inputs: [src],
    outputs: [dst],
    grid: { threads: n },
    uniforms: {
      n,
      src_offset: srcOffset,
      dst_offset: dstOffset,
      shape: c.shape,
      src_strides: c.strides[0]!,
      dst_strides: c.strides[1]!,
    },
  });
  return out;
}

export function expand(rt: GpuRuntime, x: KernelTensor, outShape: Shape): GPUBuffer {
  const bytes = sizeOf(outShape) * 4;
  return copyStrided(rt, 'expand', x, bytes, outShape, broadcastStrides(x.shape, outShape), 0, stridesOf(outShape), 0);
}

export function permute(rt: GpuRuntime, x: KernelTensor, perm: readonly number[]): GPUBuffer {
  const strides = stridesOf(x.shape);
  const outShape = perm.map((p) => x.shape[p]!);
  const bytes = sizeOf(outShape) * 4;
  return copyStrided(
    rt,
    'permute',
    x,
    bytes,
    outShape,
    perm.map((p) => strides[p]!),
    0,
    stridesOf(outShape),
    0,
  );
}

export function slice(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const strides = stridesOf(x.shape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'slice', x, sizeOf(outShape) * 4, outShape, strides, offset, stridesOf(outShape), 0);
}

export function pad(rt: GpuRuntime, x: KernelTensor, begin: readonly number[], outShape: Shape): GPUBuffer {
  const out = fill(rt, outShape, x.dtype, 0);
  const strides = stridesOf(outShape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'pad', x, out, x.shape, stridesOf(x.shape), 0, strides, offset);
}

export function concat(rt: GpuRuntime, xs: readonly KernelTensor[], axis: number, outShape: Shape): GPUBuffer {
  const out = rt.alloc(sizeOf(outShape) * 4);
  const strides = stridesOf(outShape);
  let off = 0;
  xs.forEach((x) => {
    copyStrided(rt, 'concat', x, out, x.shape, stridesOf(x.shape), 0, strides, off * strides[axis]!);
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
  const n = sizeOf(dst.shape);
  const out = inPlace ? bufferOf(dst.storage) : copyStrided(rt, 'updateSlice', dst, n * 4, [n], [1], 0, [1], 0);
  const strides = stridesOf(dst.shape);
  const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
  return copyStrided(rt, 'updateSlice', src, out, src.shape, stridesOf(src.shape), 0, strides, offset);
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
