import type { KernelTensor } from '../../../core/backend.js';
import { registerKernels, type ReduceOp } from '../../../core/kernels.js';
import { sizeOf, stridesOf } from '../../../core/shape.js';
import reduceSrc from '../../../../shaders/reduce.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, checkInputs, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { copyStrided } from './movement.js';

/**
 * Reduce over `axes` (keeping them as size-1 dims). Size-1 dims are dropped and neighbouring dims of the same
 * role merged; if the reduced dims then form one run ([outer, R, inner]) one dispatch does it, otherwise the
 * kept dims are first permuted to the front (a strided copy) so they do.
 */
const OPS: Record<ReduceOp, string> = { sum: 'sum', max: 'max', min: 'min', logsumexp: 'lse' };

/** Rows longer than this (with inner == 1) use the workgroup tree; shorter ones one thread per row. */
const TREE_MIN = 128;

/** One program per fold and element type (logsumexp: f32 only), with both entry points. */
const reduceProgram = (op: ReduceOp, t: 'f32' | 'i32'): Program =>
  cachedProgram(`reduce:${OPS[op]}:${t}`, () => ({
    name: op,
    inputs: { x: t },
    outputs: { out: t },
    uniforms: { outer: 'u32', r: 'u32', inner: 'u32', grid_x: 'u32' },
    workgroupSize: 64,
    body: fillTemplate('reduce.wgsl', reduceSrc, {
      T: t,
      S: op === 'logsumexp' ? 'vec2<f32>' : 'T',
      OP: OPS[op],
      LOWEST: t === 'f32' ? 'return neg_inf();' : 'return -2147483647 - 1;',
      HIGHEST: t === 'f32' ? 'return -neg_inf();' : 'return 2147483647;',
    }),
    entryPoints: ['reduce_tree', 'reduce_loop'],
  }));

export function reduce(rt: GpuRuntime, op: ReduceOp, x: KernelTensor, axes: readonly number[]): GPUBuffer {
  const program = reduceProgram(op, op === 'logsumexp' ? 'f32' : wgslType(op, x.dtype));
  checkInputs(program, op, [x]);
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
  let src: KernelTensor | GPUBuffer = x;
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
  const [out] = launch(rt, program, {
    entryPoint: tree ? 'reduce_tree' : 'reduce_loop',
    inputs: [src],
    outputs: [nOut * 4],
    // tree: one workgroup per output row; loop: one thread per (outer, inner) output.
    grid: tree ? { workgroups: outer } : { threads: outer * inner },
    uniforms: { outer, r, inner },
  });
  if (temp) rt.release(temp);
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  reduce: (b, op, x, axes) => asStorage(reduce(b.runtime, op, x, axes)),
});
