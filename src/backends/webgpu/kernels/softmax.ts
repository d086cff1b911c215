import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import softmaxSrc from '../../../../shaders/softmax.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { fillTemplate } from '../wgsl.js';
import { Words } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';

/** Softmax / log-softmax along `axis`: a workgroup per row for long last-axis rows, else a thread per line. */
const TREE_MIN = 128;

export function softmax(rt: GpuRuntime, x: KernelTensor, axis: number, log: boolean): GPUBuffer {
  const kernel = log ? 'logSoftmax' : 'softmax';
  if (x.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${x.dtype}`);
  const n = sizeOf(x.shape);
  const outer = sizeOf(x.shape.slice(0, axis));
  const len = x.shape[axis]!;
  const inner = sizeOf(x.shape.slice(axis + 1));
  const tree = inner === 1 && len >= TREE_MIN;
  const [out] = launchSpec(rt, {
    kernel,
    key: `softmax:${log}`,
    entryPoint: tree ? 'softmax_tree' : 'softmax_loop',
    source: () => `${rowReduce}\n${fillTemplate('softmax.wgsl', softmaxSrc, { LOG: log })}`,
    inputs: [bufferOf(x.storage)],
    outputs: [n * 4],
    // tree: one workgroup per row; loop: one thread per (outer, inner) line, 64 per workgroup.
    grid: tree ? { threads: outer, workgroupSize: 1 } : { threads: outer * inner, workgroupSize: 64 },
    uniforms: ([gx]) =>
      new Words(4)
        .u(0, outer)
        .u(1, len)
        .u(2, inner)
        .u(3, tree ? gx : gx * 64).u32,
  });
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  softmax: (b, x, axis, log) => asStorage(softmax(b.runtime, x, axis, log)),
});
