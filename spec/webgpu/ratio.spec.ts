import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { initParams, smallConfig } from '../../src/nn/index.js';
import { sampleRollouts, scoreRollouts } from '../../src/rl/index.js';
import { additionTask, tokenizerFor } from '../../src/tasks/index.js';
import { describeGpu } from './helpers.js';

/**
 * The first optimisation step's ratio pi_theta / pi_old is exactly 1 on the WebGPU backend: the trainer records
 * pi_old with the training forward (`scoreRollouts` re-scores it there), the same kernels on the same batch. The sampler's own
 * incremental (KV-cache) recording runs other shapes, which on a GPU may select other matmul kernels and round
 * differently (on llvmpipe it measured bitwise equal as well); the re-scoring makes exactness not depend on it.
 */
const task = additionTask();
const tokenizer = tokenizerFor(task);
const config = smallConfig(tokenizer.vocabSize, {
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 64,
  maxSeqLen: 24,
});

describeGpu('webgpu: pi_old recorded for training', (gpu) => {
  it('gives a first-iteration ratio of exactly 1, at temperature 1 and 0.7', async () => {
    const params = initParams(config, new T.Rng(2), { backend: gpu, std: 0.3 });
    const prompts = ['12+34=', '7+58=', '90+9='];
    for (const temperature of [1, 0.7]) {
      const rollouts = await sampleRollouts(params, config, tokenizer, prompts, new T.Rng(4), {
        groupSize: 4,
        maxNewTokens: 6,
        temperature,
      });
      const { old } = await scoreRollouts({ sampler: params, reference: null }, config, rollouts, null);
      const fresh = T.scoreLogProbs(params, config, rollouts, { temperature });
      const current = await fresh.data();
      fresh.dispose();
      for (let i = 0; i < current.length; i++) {
        if (rollouts.completionMask[i] === 0) continue;
        expect(Math.exp(current[i]! - old[i]!)).toBe(1);
      }
      // The sampler's incremental recording is the same distribution, at most up to f32 rounding.
      let maxDiff = 0;
      for (let i = 0; i < current.length; i++)
        if (rollouts.completionMask[i] !== 0)
          maxDiff = Math.max(maxDiff, Math.abs(current[i]! - rollouts.sampledLogProbs[i]!));
      expect(maxDiff).toBeLessThan(1e-4);
    }
    T.dispose(params);
  });
});
