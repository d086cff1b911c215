import type { KernelTensor } from '../../../core/backend.js';
import { registerKernels, type ReduceOp } from '../../../core/kernels.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf, stridesOf } from '../../../core/shape.js';
import reduceSrc from '../../../../shaders/reduce.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { copyStrided } from './movement.js';
import { Words } from './layout.js';

/**
 * Reduce over `axes` (keeping them as size-1 dims). Size-1 dims are dropped and neighbouring dims of the same
 * role merged; if the reduced dims then form one run ([outer, R, inner]) one dispatch does it, otherwise the
 * kept dims are first permuted to the front (a strided copy) so they do.
 */
const OPS: Record<ReduceOp, string> = { sum: 'sum', max: 'max', min: 'min', logsumexp: 'lse' };

/** Rows longer than this (with inner == 1) use the workgroup tree; shorter ones one thread per row. */
const TREE_MIN = 128;

export function reduce(rt: GpuRuntime, op: ReduceOp, x: KernelTensor, axes: readonly number[]): GPUBuffer {
  const t = wgslType(op, x.dtype);
  if (op === 'logsumexp' && t !== 'f32')
    throw new DTypeError('logsumexp', `the WebGPU kernel needs f32, got ${x.dtype}`);
  const nOut = sizeOf(x.shape.map((d, i) => (axes.includes(i) ? 1 : d)));
  if (nOut === 0) return rt.alloc(0);
  // Runs of (reduced?, size), size-1 dims dropped.
  const runs: { red: boolean; size: number }[] = [];
  x.shape.forEach((d, i) => {
    if (d === 1) return;
    const red = axes.includes(i);
    const last = runs[runs.length - 1];
    if (last && last.red === red) last.size *= d;
    else runs.push({ red, size: d });
  });
  let src = bufferOf(x.storage);
  let temp: GPUBuffer | null = null;
  let outer = 1;
  let r = 1;
  let inner = 1;
  const redRuns = runs.filter((q) => q.red).length;
  if (redRuns <= 1) {
    const at = runs.findIndex((q) => q.red);
    if (at >= 0) {
      outer = runs.slice(0, at).reduce((s, q) => s * q.size, 1);
      r = runs[at]!.size;
      inner = runs.slice(at + 1).reduce((s, q) => s * q.size, 1);
    } else outer = nOut;
  } else {
    // Move kept dims first (in order), reduced dims last: then it is [outer, R] rows.
    const kept = x.shape.flatMap((_, i) => (axes.includes(i) ? [] : [i]));
    const perm = [...kept, ...axes];
    const strides = stridesOf(x.shape);
    const permShape = perm.map((p) => x.shape[p]!);
    temp = copyStrided(
      rt,
      op,
      src,
      sizeOf(x.shape) * 4,
      permShape,
      perm.map((p) => strides[p]!),
      0,
      stridesOf(permShape),
      0,
    );
    src = temp;
    outer = nOut;
    r = sizeOf(x.shape) / nOut;
  }
  const tree = inner === 1 && r >= TREE_MIN;
  const s = op === 'logsumexp' ? 'vec2<f32>' : 'T';
  const key = `reduce:${OPS[op]}:${t}:${tree ? 'tree' : 'loop'}`;
  const [out] = launchSpec(rt, {
    kernel: op,
    key,
    entryPoint: tree ? 'reduce_tree' : 'reduce_loop',
    source: () =>
      fillTemplate('reduce.wgsl', reduceSrc, {
        T: t,
        S: s,
        OP: OPS[op],
        LOWEST: t === 'f32' ? 'return neg_inf();' : 'return -2147483647 - 1;',
        HIGHEST: t === 'f32' ? 'return -neg_inf();' : 'return 2147483647;',
      }),
    inputs: [src],
    outputs: [nOut * 4],
    // tree: one workgroup per output row; loop: one thread per (outer, inner) output, 64 per workgroup.
    grid: tree ? { threads: outer, workgroupSize: 1 } : { threads: outer * inner, workgroupSize: 64 },
    uniforms: ([gx]) =>
      new Words(4)
        .u(0, outer)
        .u(1, r)
        .u(2, inner)
        .u(3, tree ? gx : gx * 64).u32,
  });
  if (temp) rt.release(temp);
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  reduce: (b, op, x, axes) => asStorage(reduce(b.runtime, op, x, axes)),
});
