import type { KernelTensor } from '../../../core/backend.js';
import { sizeOf } from '../../../core/shape.js';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import softmaxSrc from '../../../../shaders/softmax.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillTemplate } from '../wgsl.js';
import { registerKernels } from '../../../core/kernels.js';
import { ROW_WORKGROUPS, rowWorkgroup } from './rows.js';

/** Softmax / log-softmax along `axis`: a workgroup per row for long last-axis rows, else a thread per line. */
const TREE_MIN = 128;

const softmaxProgram = (log: boolean, wg: number): Program =>
  cachedProgram(`softmax:${log}:${wg}`, () => ({
    name: log ? 'logSoftmax' : 'softmax',
    inputs: { x: 'f32' },
    outputs: { out: 'f32' },
    uniforms: { outer: 'u32', len: 'u32', inner: 'u32', grid_x: 'u32' },
    workgroupSize: wg,
    body: `${rowReduce}\n${fillTemplate('softmax.wgsl', softmaxSrc, { LOG: log })}`,
    entryPoints: ['softmax_tree', 'softmax_loop'],
  }));

export function softmax(rt: GpuRuntime, x: KernelTensor, axis: number, log: boolean): GPUBuffer {
  const n = sizeOf(x.shape);
  const outer = sizeOf(x.shape.slice(0, axis));
  const len = x.shape[axis]!;
  const inner = sizeOf(x.shape.slice(axis + 1));
  const tree = inner === 1 && len >= TREE_MIN;
  const call = {
    entryPoint: tree ? 'softmax_tree' : 'softmax_loop',
    inputs: [x],
    outputs: [n * 4] as const,
    // tree: one workgroup per row; loop: one thread per (outer, inner) line.
    grid: tree ? { workgroups: outer } : { threads: outer * inner },
    uniforms: { outer, len, inner },
  };
  // The tree's workgroup size is tuned per class of rows (kernels/rows.ts); the loop keeps 64 threads.
  const programOf = (wg: number): Program => softmaxProgram(log, wg);
  const wg = tree ? rowWorkgroup(rt, programOf, call, outer, len) : ROW_WORKGROUPS[0];
  const [out] = launch(rt, programOf(wg), call);
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  softmax: (b, x, axis, log) => asStorage(softmax(b.runtime, x, axis, log)),
});
