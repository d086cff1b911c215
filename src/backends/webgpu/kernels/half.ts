import type { KernelTensor } from '../../../core/backend.js';
import type { HalfDType } from '../../../core/dtype.js';
import { sizeOf } from '../../../core/shape.js';
import halfSrc from '../../../../shaders/half.wgsl';
import widenSrc from '../../../../shaders/widen.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, type ElementType, type Program } from '../program.js';
import type { GpuRuntime } from '../runtime.js';

/**
 * Frozen weights stored as bf16 or f16, two elements per u32 word (element 2i in the low half): the binding type
 * that holds them, the WGSL that reads them as f32 (shaders/half.wgsl's conversions), and the cast that widens a
 * whole tensor. matmul (its B operand) and gather read them through these readers; nothing writes them.
 */
export const halfBinding = (dtype: HalfDType): ElementType => (dtype === 'bf16' ? 'bf16x2' : 'f16x2');

/**
 * WGSL for a packed binding `name`: `<name>_at(i)`, element i as f32, and `<name>_vec4(i)`, elements i..i+3 (i a
 * multiple of 4, so they are two whole words).
 */
export function halfReaders(dtype: HalfDType, name: string): string {
  const widen = dtype === 'bf16' ? 'bf16_to_f32' : 'f16_to_f32';
  return `${halfSrc}
fn ${name}_at(i: u32) -> f32 {
  return ${widen}((${name}[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu);
}

fn ${name}_vec4(i: u32) -> vec4<f32> {
  let lo = ${name}[i >> 1u];
  let hi = ${name}[(i >> 1u) + 1u];
  return vec4<f32>(${widen}(lo & 0xffffu), ${widen}(lo >> 16u), ${widen}(hi & 0xffffu), ${widen}(hi >> 16u));
}
`;
}

const widenProgram = (dtype: HalfDType): Program =>
  cachedProgram(`widen:${dtype}`, () => ({
    name: 'cast',
    inputs: { x: halfBinding(dtype) },
    outputs: { out: 'f32' },
    uniforms: { n: 'u32', grid_x: 'u32' },
    workgroupSize: 256,
    body: `${halfReaders(dtype, 'x')}\n${widenSrc}`,
  }));

/** cast(x, 'f32') of a bf16/f16 tensor: every element widened (an explicit f32 copy). */
export function widenHalf(rt: GpuRuntime, x: KernelTensor): GPUBuffer {
  const n = sizeOf(x.shape);
  const [out] = launch(rt, widenProgram(x.dtype as HalfDType), {
    inputs: [x],
    outputs: [n * 4],
    grid: { threads: n },
    uniforms: { n },
  });
  return out;
}
