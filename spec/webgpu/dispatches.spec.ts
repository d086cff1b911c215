import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { readMetrics } from '../../src/training/metrics.js';
import { describeGpu } from './helpers.js';

/**
 * The budget of one warmed SFT training step (forward, backward, AdamW with clipping over every parameter) of
 * the d512 L8 model (8 heads, dFf 1536, vocab 1024), counted by the runtime: dispatches (before the fused
 * kernels it was 1,380), buffers created, submits and read-backs. Dispatch counts do not depend on the batch or
 * the sequence length, so a tiny batch is enough. The step measured is the third: the first two met every
 * shape (pipelines, pool sizes, bind groups; and, were tuning on, the tuner's classes, tuned at their end).
 * The budget was 400 at 392 dispatches; it is 412 at 411 since two kernels that an H100's profile showed
 * idling the device became several passes (bench/results/gpu-h100-2026-11-28): RMSNorm's weight gradient, two
 * passes over row chunks (17 more dispatches) instead of one thread per column (0.47 ms a call, a quarter of the
 * step's GPU time at B16 x T256), and scatterAdd, a fill and a row-list pass before its sum (2 more) instead of
 * every output scanning every index (0.1 s at the Qwen3-0.6B size). It is 371 since the backward folds the
 * cotangents an input gathers into the kernels that produce them (`absorbed`, core/tape.ts): the add after each
 * norm's backward (16) and after the second and third products of one input (gate and up; q, k and v: 24).
 */
describeGpu('webgpu dispatch budget', (gpu) => {
  it('a warmed d512 L8 SFT step: <= 371 dispatches, 0 buffers created, one read-back at its end, full batches', async () => {
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
    let params = T.initParams(config, new T.Rng(0), { backend: gpu });
    let opt = T.adamwInit(params);
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
    const step = async () => {
      const before = gpu.stats();
      const out = T.tidy(() => {
        const [loss, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sftLoss(p, config, batch))(params);
        return { loss, ...T.adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 }) };
      });
      const encoded = gpu.stats();
      const loss = (await out.loss.data())[0]!;
      const after = gpu.stats();
      T.dispose([params, opt, out.loss, out.gradNorm]);
      params = out.params;
      opt = out.state;
      return {
        loss,
        dispatches: encoded.dispatches - before.dispatches,
        readBacksInside: encoded.readBacks - before.readBacks,
        readBacks: after.readBacks - before.readBacks,
        submits: after.submits - before.submits,
        buffersCreated: after.buffersCreated - before.buffersCreated,
      };
    };
    await step();
    await step();
    const s = await step();
    T.dispose([params, opt]);
    expect(Number.isFinite(s.loss)).toBe(true);
    expect(s.dispatches).toBeLessThanOrEqual(371);
    expect(s.buffersCreated, 'buffers created by a warmed step').toBe(0);
    // No host round trip inside the step: its one read-back is the loss, at its end.
    expect(s.readBacksInside, 'read-backs before the loss').toBe(0);
    expect(s.readBacks, 'read-backs in all').toBe(1);
    // A submit per full batch of 32 dispatches, and one carrying the rest with the loss's copy: no upload or
    // read inside the step forced an early one.
    expect(s.submits, `submits for ${s.dispatches} dispatches`).toBe(Math.floor(s.dispatches / 32) + 1);
  });

  it("a step's metrics read together take one read-back", async () => {
    const metrics = {
      loss: T.scalar(1.5, { backend: gpu }),
      grad_norm: T.scalar(2.5, { backend: gpu }),
      state: T.scalar(3.5, { backend: gpu }),
    };
    const before = gpu.stats().readBacks;
    expect(await readMetrics(metrics)).toEqual({ loss: 1.5, grad_norm: 2.5, state: 3.5 });
    expect(gpu.stats().readBacks - before).toBe(1);
  });
});
