import type { KernelTensor } from '../../../core/backend.js';
import { sizeOf, type Shape } from '../../../core/shape.js';
import gatherSrc from '../../../../shaders/gather.wgsl';
import gatherHalfSrc from '../../../../shaders/gather_half.wgsl';
import putSrc from '../../../../shaders/put_along_axis_add.wgsl';
import scatterSrc from '../../../../shaders/scatter_add.wgsl';
import scatterWindowedSrc from '../../../../shaders/scatter_add_windowed.wgsl';
import linksSrc from '../../../../shaders/scatter_links.wgsl';
import linksWindowedSrc from '../../../../shaders/scatter_links_windowed.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, defineProgram, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { fillInto } from './movement.js';
import { registerKernels } from '../../../core/kernels.js';
import { isHalf, type HalfDType } from '../../../core/dtype.js';
import { halfBinding, halfReaders } from './half.js';

/** gather / takeAlongAxis (reads) and their adjoints scatterAdd / putAlongAxisAdd (owner-computes sums). */

const split = (shape: Shape, axis: number): [number, number, number] => [
  sizeOf(shape.slice(0, axis)),
  shape[axis]!,
  sizeOf(shape.slice(axis + 1)),
];

/** x viewed as [outer, len, inner] around the axis; n indices; total outputs. */
const UNIFORMS = { outer: 'u32', len: 'u32', inner: 'u32', n: 'u32', total: 'u32', grid_x: 'u32' } as const;

/** Reads of 32-bit words (any dtype): gather and take_along_axis. */
const GATHER = defineProgram({
  name: 'gather',
  inputs: { x: 'u32', idx: 'i32' },
  outputs: { out: 'u32' },
  uniforms: UNIFORMS,
  workgroupSize: 256,
  body: gatherSrc,
  entryPoints: ['gather', 'take_along_axis'],
});

/** gather of a frozen bf16/f16 table: f32 rows, each element widened as it is read. */
const gatherHalfProgram = (dtype: HalfDType): Program =>
  cachedProgram(`gather:${dtype}`, () => ({
    name: 'gather',
    inputs: { x: halfBinding(dtype), idx: 'i32' },
    outputs: { out: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: 256,
    body: `${halfReaders(dtype, 'x')}\n${gatherHalfSrc}`,
  }));

/** The adjoint of take_along_axis, summing values of type `t`. */
const putProgram = (t: 'f32' | 'i32'): Program =>
  cachedProgram(`put_along_axis_add:${t}`, () => ({
    name: 'putAlongAxisAdd',
    inputs: { upd: t, idx: 'i32' },
    outputs: { out: t },
    uniforms: UNIFORMS,
    workgroupSize: 256,
    body: fillTemplate('put_along_axis_add.wgsl', putSrc, { T: t }),
  }));

/** The adjoint of gather, summing values of type `t` down the row lists `links` (scatter_links.wgsl). */
const scatterProgram = (t: 'f32' | 'i32'): Program =>
  cachedProgram(`scatter:${t}`, () => ({
    name: 'scatterAdd',
    inputs: { upd: t, links: 'i32' },
    outputs: { out: t },
    uniforms: UNIFORMS,
    workgroupSize: 256,
    body: fillTemplate('scatter_add.wgsl', scatterSrc, { T: t }),
  }));

/** The same sums a bounded walk a dispatch, for lists that may be longer than llvmpipe lets a loop run. */
const scatterWindowedProgram = (t: 'f32' | 'i32'): Program =>
  cachedProgram(`scatter-windowed:${t}`, () => ({
    name: 'scatterAdd',
    inputs: { upd: t, links: 'i32' },
    outputs: { out: t, cursor: 'i32' },
    uniforms: { ...UNIFORMS, steps: 'u32' },
    workgroupSize: 256,
    body: fillTemplate('scatter_add_windowed.wgsl', scatterWindowedSrc, { T: t }),
    entryPoints: ['start', 'resume'],
  }));

const LINKS = defineProgram({
  name: 'scatterLinks',
  inputs: { idx: 'i32' },
  outputs: { links: 'i32' },
  uniforms: { len: 'u32', n: 'u32', grid_x: 'u32' },
  workgroupSize: 64,
  body: linksSrc,
});

/** The same lists for more indices than one invocation may loop over on llvmpipe, a window of them a dispatch. */
const LINKS_WINDOWED = defineProgram({
  name: 'scatterLinks',
  key: 'scatterLinksWindowed',
  inputs: { idx: 'i32' },
  outputs: { links: 'i32' },
  uniforms: { len: 'u32', n: 'u32', q0: 'u32', q1: 'u32', grid_x: 'u32' },
  workgroupSize: 64,
  body: linksWindowedSrc,
  entryPoints: ['window', 'heads'],
});

/** Indices a links pass scans in one invocation: well under llvmpipe's silent cut of about 65,535 loop iterations. */
export const LINKS_WINDOW = 16_384;

function run(
  rt: GpuRuntime,
  kernel: string,
  program: Program,
  entryPoint: string,
  src: KernelTensor,
  indices: KernelTensor | GPUBuffer,
  [outer, len, inner]: [number, number, number],
  n: number,
  total: number,
): GPUBuffer {
  const [out] = launch(rt, program, {
    kernel,
    entryPoint,
    inputs: [src, indices],
    outputs: [total * 4],
    grid: { threads: total },
    uniforms: { outer, len, inner, n, total },
  });
  return out;
}

export function gather(rt: GpuRuntime, x: KernelTensor, indices: KernelTensor, axis: number): GPUBuffer {
  const [outer, len, inner] = split(x.shape, axis);
  const n = sizeOf(indices.shape);
  if (isHalf(x.dtype)) {
    const program = gatherHalfProgram(x.dtype as HalfDType);
    return run(rt, 'gather', program, 'main', x, indices, [outer, len, inner], n, outer * n * inner);
  }
  return run(rt, 'gather', GATHER, 'gather', x, indices, [outer, len, inner], n, outer * n * inner);
}

export function takeAlongAxis(rt: GpuRuntime, x: KernelTensor, indices: KernelTensor, axis: number): GPUBuffer {
  const dims = split(x.shape, axis);
  const n = indices.shape[axis]!;
  return run(rt, 'takeAlongAxis', GATHER, 'take_along_axis', x, indices, dims, n, sizeOf(indices.shape));
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
  const n = sizeOf(indices.shape);
  const total = sizeOf(outShape);
  // The row lists: every row's first index, then each index's next one with the same row.
  if (n <= LINKS_WINDOW) {
    const links = fillInto(rt, (len + n) * 4, len, 'i32', -1);
    launch(rt, LINKS, { inputs: [indices], outputs: [links], grid: { threads: n }, uniforms: { len, n } });
    const out = run(rt, 'scatterAdd', scatterProgram(t), 'main', updates, links, [outer, len, inner], n, total);
    rt.release(links);
    return out;
  }
  // More indices than one invocation may scan: the lists a window of indices a dispatch, then each row's head.
  const links = fillInto(rt, (len + 2 * n) * 4, len + 2 * n, 'i32', -1);
  for (let q0 = 0; q0 < n; q0 += LINKS_WINDOW) {
    const q1 = Math.min(n, q0 + LINKS_WINDOW);
    launch(rt, LINKS_WINDOWED, {
      entryPoint: 'window',
      inputs: [indices],
      outputs: [links],
      grid: { threads: n },
      uniforms: { len, n, q0, q1 },
    });
  }
  launch(rt, LINKS_WINDOWED, {
    entryPoint: 'heads',
    inputs: [indices],
    outputs: [links],
    grid: { threads: n },
    uniforms: { len, n, q0: 0, q1: 0 },
  });
  // A row's list may hold all n indices: walk LINKS_WINDOW links a dispatch, as many dispatches as n needs.
  const windowed = scatterWindowedProgram(t);
  const uniforms = { outer, len, inner, n, total, steps: LINKS_WINDOW };
  const [out, cursor] = launch(rt, windowed, {
    kernel: 'scatterAdd',
    entryPoint: 'start',
    inputs: [updates, links],
    outputs: [total * 4, total * 4],
    grid: { threads: total },
    uniforms,
  });
  for (let walked = LINKS_WINDOW; walked < n; walked += LINKS_WINDOW)
    launch(rt, windowed, {
      kernel: 'scatterAdd',
      entryPoint: 'resume',
      inputs: [updates, links],
      outputs: [out!, cursor!],
      grid: { threads: total },
      uniforms,
    });
  rt.release(links);
  rt.release(cursor!);
  return out!;
}

export function putAlongAxisAdd(
  rt: GpuRuntime,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): GPUBuffer {
  const program = putProgram(wgslType('putAlongAxisAdd', updates.dtype));
  const dims = split(outShape, axis);
  const n = indices.shape[axis]!;
  return run(rt, 'putAlongAxisAdd', program, 'main', updates, indices, dims, n, sizeOf(outShape));
}

registerKernels<GpuBackend>('webgpu', {
  gather: (b, x, indices, axis) => asStorage(gather(b.runtime, x, indices, axis)),
  scatterAdd: (b, updates, indices, axis, outShape) =>
    asStorage(scatterAdd(b.runtime, updates, indices, axis, outShape)),
  takeAlongAxis: (b, x, indices, axis) => asStorage(takeAlongAxis(b.runtime, x, indices, axis)),
  putAlongAxisAdd: (b, updates, indices, axis, outShape) =>
    asStorage(putAlongAxisAdd(b.runtime, updates, indices, axis, outShape)),
});
