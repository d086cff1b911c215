import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import adamwSrc from '../../../../shaders/adamw.wgsl';
import { launchSpec } from '../launch.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { Words } from './layout.js';
import { registerKernels, type AdamWHyper } from '../../../core/kernels.js';

/** One fused AdamW step (shaders/adamw.wgsl); the bias corrections are computed here in double precision. */
export function adamw(
  rt: GpuRuntime,
  p: KernelTensor,
  g: KernelTensor,
  m: KernelTensor,
  v: KernelTensor,
  h: AdamWHyper,
): [GPUBuffer, GPUBuffer, GPUBuffer] {
  for (const t of [p, g, m, v])
    if (t.dtype !== 'f32') throw new DTypeError('adamw', `the WebGPU kernel needs f32, got ${t.dtype}`);
  const n = sizeOf(p.shape);
  const words = (gx: number): Uint32Array =>
    new Words(12)
      .u(0, n)
      .u(1, gx * 256)
      .f(2, h.lr)
      .f(3, h.beta1)
      .f(4, h.beta2)
      .f(5, h.eps)
      .f(6, 1 - h.lr * h.weightDecay)
      .f(7, 1 - h.beta1 ** h.step)
      .f(8, 1 - h.beta2 ** h.step)
      .f(9, 1 - h.beta1)
      .f(10, 1 - h.beta2).u32;
  return launchSpec(rt, {
    kernel: 'adamw',
    source: () => adamwSrc,
    inputs: [p, g, m, v].map((t) => bufferOf(t.storage)),
    outputs: [n * 4, n * 4, n * 4],
    grid: { threads: n, workgroupSize: 256 },
    uniforms: ([gx]) => words(gx),
  });
}

registerKernels<GpuBackend>('webgpu', {
  adamw: (b, param, grad, m, v, hyper) => {
    const [p1, m1, v1] = adamw(b.runtime, param, grad, m, v, hyper);
    return [asStorage(p1), asStorage(m1), asStorage(v1)];
  },
});
