/**
 * Dispatches encoded by one SFT training step (forward + backward + AdamW over all parameters) on the WebGPU
 * backend, grouped by kernel. Dispatch counts do not depend on batch or sequence length, so a small batch is
 * enough (llvmpipe is slow). Run: node esbuild.config.mjs && node dist/bench/dispatches.js [--by-kernel]
 */
import { createWebGpuBackend, dispose, Rng, tidy, valueAndGrad, type WebGpuBackend } from '../src/index.js';
import {
  adamwInit,
  adamwStep,
  initParams,
  smallConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../src/nn/index.js';
import { packSequences, sftLoss } from '../src/rl/index.js';

export const MODELS: Record<string, () => TransformerConfig> = {
  'default (smallConfig, vocab 24)': () => smallConfig(24),
  'd512 L8 (8 heads, dFf 1536, vocab 1024)': () => ({
    ...smallConfig(1024),
    dModel: 512,
    nLayers: 8,
    nHeads: 8,
    nKvHeads: 8,
    dFf: 1536,
  }),
};

/** Dispatches (by kernel) of the second of two SFT steps (AdamW with clipping) on a batch of 2 x 8 tokens. */
export async function countStep(
  gpu: WebGpuBackend,
  config: TransformerConfig,
): Promise<{ total: number; byKernel: Map<string, number> }> {
  const rng = new Rng(0);
  let params = initParams(config, rng, { backend: gpu });
  let opt = adamwInit(params);
  const ids = (n: number): number[] => Array.from({ length: n }, (_, i) => 1 + ((i * 7) % (config.vocabSize - 1)));
  const batch = packSequences([ids(2), ids(3)], [ids(5), ids(4)], 0);
  const rt = gpu.runtime;
  let total = 0;
  for (let s = 0; s < 2; s++) {
    rt.resetKernelCounts();
    const before = rt.stats().dispatches;
    const out = tidy(() => {
      const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, config, batch))(params);
      return { loss, ...adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 }) };
    });
    total = rt.stats().dispatches - before;
    await out.loss.data();
    dispose([params, opt.m, opt.v, out.loss, out.gradNorm]);
    params = out.params;
    opt = out.state;
  }
  const byKernel = rt.kernelCounts();
  dispose([params, opt.m, opt.v]);
  return { total, byKernel };
}

if (process.argv[1]?.endsWith('dispatches.js')) {
  const gpu = await createWebGpuBackend();
  console.log(`adapter: ${gpu.adapter.summary}`);
  for (const [name, make] of Object.entries(MODELS)) {
    const { total, byKernel } = await countStep(gpu, make());
    console.log(`${name}: ${total} dispatches per SFT step`);
    if (process.argv.includes('--by-kernel')) {
      for (const [k, n] of [...byKernel].sort((a, b) => b[1] - a[1])) console.log(`  ${k.padEnd(28)} ${n}`);
    }
  }
  gpu.dispose();
}
