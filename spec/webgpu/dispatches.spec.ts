import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from './helpers.js';

/**
 * The dispatch budget of one SFT training step (forward, backward, AdamW with clipping over every parameter)
 * of the d512 L8 model (8 heads, dFf 1536, vocab 1024), counted by the runtime. Dispatch counts do not depend on
 * the batch or the sequence length, so a tiny batch is enough. Before the fused kernels it was 1,380.
 */
describeGpu('webgpu dispatch budget', (gpu) => {
  it('a d512 L8 SFT step encodes at most 400 dispatches', async () => {
    const config: T.TransformerConfig = {
      vocabSize: 1024,
      dModel: 512,
      nLayers: 8,
      nHeads: 8,
      nKvHeads: 8,
      dFf: 1536,
      maxSeqLen: 16,
      ropeTheta: 1e4,
      rmsEps: 1e-6,
    };
    const params = T.initParams(config, new T.Rng(0), { backend: gpu });
    const opt = T.adamwInit(params);
    const batch = T.packSequences(
      [
        [1, 2],
        [3, 4, 5],
      ],
      [
        [6, 7, 8],
        [9, 10],
      ],
      0,
    );
    const before = gpu.runtime.stats().dispatches;
    const out = T.tidy(() => {
      const [loss, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sftLoss(p, config, batch))(params);
      return { loss, ...T.adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 }) };
    });
    const dispatches = gpu.runtime.stats().dispatches - before;
    expect(Number.isFinite((await out.loss.data())[0]!)).toBe(true);
    T.dispose([params, opt.m, opt.v, out]);
    expect(dispatches).toBeLessThanOrEqual(400);
  });
});
