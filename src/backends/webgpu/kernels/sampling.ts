import type { KernelTensor } from '../../../core/backend.js';
import { registerKernels } from '../../../core/kernels.js';
import sampleTokensSrc from '../../../../shaders/sample_tokens.wgsl';
import { launch } from '../launch.js';
import { cachedProgram, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';

/**
 * Token choice on the device: one workgroup per row of log-probs (shaders/sample_tokens.wgsl says how). The
 * workgroup has about V / 64 threads, from 8 to 256: a short row needs few, and each of its ~40 barriers costs
 * every thread (on a CPU rasterizer, a switch of each SIMD group: 4 ms a call at V = 24 with 256 threads).
 */
const sampleTokensProgram = (threads: number): Program =>
  cachedProgram(`sampleTokens:${threads}`, () => ({
    name: 'sampleTokens',
    inputs: { lp: 'f32', draws: 'f32' },
    outputs: { ids: 'i32', chosen: 'f32' },
    uniforms: { rows: 'u32', v: 'u32', grid_x: 'u32', greedy: 'u32', truncate: 'u32', frac: 'u32', top_p: 'f32' },
    workgroupSize: threads,
    body: sampleTokensSrc,
  }));

/** A power of two in [8, 256] near v / 64. */
export const sampleTokensThreads = (v: number): number =>
  Math.min(256, Math.max(8, 2 ** Math.ceil(Math.log2(Math.max(1, v / 64)))));

export function sampleTokens(
  rt: GpuRuntime,
  logProbs: KernelTensor,
  draws: KernelTensor,
  greedy: boolean,
  topP: number,
): [GPUBuffer, GPUBuffer] {
  const [rows, v] = [logProbs.shape[0]!, logProbs.shape[1]!];
  // The fixed point's fraction bits: v values below 2^(frac + 2) each (p at most twice the largest p's power of
  // two) sum below 2^64.
  const frac = 62 - (32 - Math.clz32(v - 1));
  return launch(rt, sampleTokensProgram(sampleTokensThreads(v)), {
    inputs: [logProbs, draws],
    outputs: [rows * 4, rows * 4],
    grid: { workgroups: rows },
    uniforms: { rows, v, greedy: greedy ? 1 : 0, truncate: topP < 1 ? 1 : 0, frac, top_p: topP },
  });
}

registerKernels<GpuBackend>('webgpu', {
  sampleTokens: (b, logProbs, draws, greedy, topP) => {
    const [ids, chosen] = sampleTokens(b.runtime, logProbs, draws, greedy, topP);
    return [asStorage(ids), asStorage(chosen)];
  },
});
