import type { KernelTensor } from '../../../core/backend.js';
import { sizeOf } from '../../../core/shape.js';
import adamwSrc from '../../../../shaders/adamw.wgsl';
import { launch } from '../launch.js';
import { defineProgram } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { registerKernels, type AdamWHyper } from '../../../core/kernels.js';

/** One fused AdamW step (shaders/adamw.wgsl); the bias corrections are computed here in double precision. */
const ADAMW = defineProgram({
  name: 'adamw',
  inputs: { p: 'f32', g: 'f32', m: 'f32', v: 'f32' },
  outputs: { p_out: 'f32', m_out: 'f32', v_out: 'f32' },
  uniforms: {
    n: 'u32',
    grid_x: 'u32',
    lr: 'f32',
    beta1: 'f32',
    beta2: 'f32',
    eps: 'f32',
    decay: 'f32', // 1 - lr * weight_decay
    c1: 'f32',
    c2: 'f32',
    one_minus_beta1: 'f32',
    one_minus_beta2: 'f32',
  },
  workgroupSize: 256,
  body: adamwSrc,
});

export function adamw(
  rt: GpuRuntime,
  p: KernelTensor,
  g: KernelTensor,
  m: KernelTensor,
  v: KernelTensor,
  h: AdamWHyper,
): [GPUBuffer, GPUBuffer, GPUBuffer] {
  const n = sizeOf(p.shape);
  return launch(rt, ADAMW, {
    inputs: [p, g, m, v],
    outputs: [n * 4, n * 4, n * 4],
    grid: { threads: n },
    uniforms: {
      n,
      lr: h.lr,
      beta1: h.beta1,
      beta2: h.beta2,
      eps: h.eps,
      decay: 1 - h.lr * h.weightDecay,
      c1: 1 - h.beta1 ** h.step,
      c2: 1 - h.beta2 ** h.step,
      one_minus_beta1: 1 - h.beta1,
      one_minus_beta2: 1 - h.beta2,
    },
  });
}

registerKernels<GpuBackend>('webgpu', {
  adamw: (b, param, grad, m, v, hyper) => {
    const [p1, m1, v1] = adamw(b.runtime, param, grad, m, v, hyper);
    return [asStorage(p1), asStorage(m1), asStorage(v1)];
  },
});
