import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf, type Shape } from '../../../core/shape.js';
import gatherSrc from '../../../../shaders/gather.wgsl';
import scatterSrc from '../../../../shaders/scatter_add.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { Words } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';

/** gather / takeAlongAxis (reads) and their adjoints scatterAdd / putAlongAxisAdd (owner-computes sums). */

const split = (shape: Shape, axis: number): [number, number, number] => [
  sizeOf(shape.slice(0, axis)),
  shape[axis]!,
  sizeOf(shape.slice(axis + 1)),
];

function indicesOf(op: string, indices: KernelTensor): GPUBuffer {
  if (indices.dtype !== 'i32') throw new DTypeError(op, `indices must be i32, got ${indices.dtype}`);
  return bufferOf(indices.storage);
}

function run(
  rt: GpuRuntime,
  kernel: string,
  entry: string,
  file: 'gather' | 'scatter',
  t: 'f32' | 'i32',
  src: GPUBuffer,
  idx: GPUBuffer,
  [outer, len, inner]: [number, number, number],
  n: number,
  total: number,
): GPUBuffer {
  const [out] = launchSpec(rt, {
    kernel,
    key: file === 'gather' ? `gather:${entry}` : `scatter:${entry}:${t}`,
    entryPoint: entry,
    source: () => (file === 'gather' ? gatherSrc : fillTemplate('scatter_add.wgsl', scatterSrc, { T: t })),
    inputs: [src, idx],
    outputs: [total * 4],
    grid: { threads: total, workgroupSize: 256 },
    uniforms: ([gx]) => new Words(8).list(0, [outer, len, inner, n, total, gx * 256]).u32,
  });
  return out;
}

export function gather(rt: GpuRuntime, x: KernelTensor, indices: KernelTensor, axis: number): GPUBuffer {
  const t = wgslType('gather', x.dtype);
  const [outer, len, inner] = split(x.shape, axis);
  const n = sizeOf(indices.shape);
  return run(
    rt,
    'gather',
    'gather',
    'gather',
    t,
    bufferOf(x.storage),
    indicesOf('gather', indices),
    [outer, len, inner],
    n,
    outer * n * inner,
  );
}

export function takeAlongAxis(rt: GpuRuntime, x: KernelTensor, indices: KernelTensor, axis: number): GPUBuffer {
  const t = wgslType('takeAlongAxis', x.dtype);
  const [outer, len, inner] = split(x.shape, axis);
  const n = indices.shape[axis]!;
  const idx = indicesOf('takeAlongAxis', indices);
  return run(
    rt,
    'takeAlongAxis',
    'take_along_axis',
    'gather',
    t,
    bufferOf(x.storage),
    idx,
    [outer, len, inner],
    n,
    sizeOf(indices.shape),
  );
}

export function scatterAdd(
  rt: GpuRuntime,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): GPUBuffer {
  const t = wgslType('scatterAdd', updates.dtype);
  const [outer, len, inner] = split(outShape, axis);
  const idx = indicesOf('scatterAdd', indices);
  return run(
    rt,
    'scatterAdd',
    'scatter_add',
    'scatter',
    t,
    bufferOf(updates.storage),
    idx,
    [outer, len, inner],
    sizeOf(indices.shape),
    sizeOf(outShape),
  );
}

export function putAlongAxisAdd(
  rt: GpuRuntime,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): GPUBuffer {
  const t = wgslType('putAlongAxisAdd', updates.dtype);
  const [outer, len, inner] = split(outShape, axis);
  const idx = indicesOf('putAlongAxisAdd', indices);
  const n = indices.shape[axis]!;
  return run(
    rt,
    'putAlongAxisAdd',
    'put_along_axis_add',
    'scatter',
    t,
    bufferOf(updates.storage),
    idx,
    [outer, len, inner],
    n,
    sizeOf(outShape),
  );
}

registerKernels<GpuBackend>('webgpu', {
  gather: (b, x, indices, axis) => asStorage(gather(b.runtime, x, indices, axis)),
  scatterAdd: (b, updates, indices, axis, outShape) =>
    asStorage(scatterAdd(b.runtime, updates, indices, axis, outShape)),
  takeAlongAxis: (b, x, indices, axis) => asStorage(takeAlongAxis(b.runtime, x, indices, axis)),
  putAlongAxisAdd: (b, updates, indices, axis, outShape) =>
    asStorage(putAlongAxisAdd(b.runtime, updates, indices, axis, outShape)),
});
