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
/**
 * Elements a workgroup of the split passes folds (1,024 per thread), and the row length from which a row is split
 * (4,096 per thread of one workgroup). Beyond about 65,535 loop iterations in one invocation Mesa's llvmpipe ends
 * the loops and the sum comes out wrong without an error; on a GPU one workgroup per long row is also slow.
 */
const SPLIT_CHUNK = 64 * 1024;
const SPLIT_MIN = 4 * SPLIT_CHUNK;
/** A one-thread-per-output fold over more than this many values goes through the rows path instead. */
const LOOP_MAX = 16384;

/** One program per fold and element type (logsumexp: f32 only), with both entry points. */
const reduceProgram = (op: ReduceOp, t: 'f32' | 'i32'): Program =>
  cachedProgram(`reduce:${OPS[op]}:${t}`, () => ({
    name: op,
    inputs: { x: t },
    outputs: { out: t },
    uniforms: { outer: 'u32', r: 'u32', inner: 'u32', chunk: 'u32', grid_x: 'u32' },
    workgroupSize: 64,
    body: fillTemplate('reduce.wgsl', reduceSrc, {
      T: t,
      S: op === 'logsumexp' ? 'vec2<f32>' : 'T',
      OP: OPS[op],
      LOWEST: t === 'f32' ? 'return neg_inf();' : 'return -2147483647 - 1;',
      HIGHEST: t === 'f32' ? 'return -neg_inf();' : 'return 2147483647;',
      PUT_STATE: op === 'logsumexp' ? 'out[2u * i] = s.x;\n  out[2u * i + 1u] = s.y;' : 'out[i] = s;',
      GET_STATE: op === 'logsumexp' ? 'return vec2<f32>(x[2u * i], x[2u * i + 1u]);' : 'return x[i];',
    }),
    entryPoints: ['reduce_tree', 'reduce_loop', 'split_fold', 'split_total'],
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
  const at = runs.findIndex((q) => q.red);
  // A long fold over a strided axis (inner > 1) is moved to rows first, as separated runs are.
  const longStrided = redRuns === 1 && at < runs.length - 1 && runs[at]!.size > LOOP_MAX;
  if (redRuns <= 1 && !longStrided) {
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
  const out = inner === 1 && r >= SPLIT_MIN ? splitRows(rt, program, op, src, outer, r) : oneLaunch();
  if (temp) rt.release(temp);
  return out;

  function oneLaunch(): GPUBuffer {
    const tree = inner === 1 && r >= TREE_MIN;
    const [written] = launch(rt, program, {
      entryPoint: tree ? 'reduce_tree' : 'reduce_loop',
      inputs: [src],
      outputs: [nOut * 4],
      // tree: one workgroup per output row; loop: one thread per (outer, inner) output.
      grid: tree ? { workgroups: outer } : { threads: outer * inner },
      uniforms: { outer, r, inner, chunk: 0 },
    });
    return written;
  }
}

/** Rows of length r split into parts of SPLIT_CHUNK: a state per part, then a workgroup per row combines them. */
function splitRows(
  rt: GpuRuntime,
  program: Program,
  op: ReduceOp,
  src: KernelTensor | GPUBuffer,
  outer: number,
  r: number,
): GPUBuffer {
  const parts = Math.ceil(r / SPLIT_CHUNK);
  const stateWords = op === 'logsumexp' ? 2 : 1;
  const [states] = launch(rt, program, {
    entryPoint: 'split_fold',
    inputs: [src],
    outputs: [outer * parts * stateWords * 4],
    grid: { workgroups: outer * parts },
    uniforms: { outer, r, inner: parts, chunk: SPLIT_CHUNK },
  });
  const [out] = launch(rt, program, {
    entryPoint: 'split_total',
    inputs: [states],
    outputs: [outer * 4],
    grid: { workgroups: outer },
    uniforms: { outer, r, inner: parts, chunk: SPLIT_CHUNK },
  });
  rt.release(states);
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  reduce: (b, op, x, axes) => asStorage(reduce(b.runtime, op, x, axes)),
});
