import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { dispose, tidy } from '../../src/core/scope.js';
import { liveTensors } from '../../src/core/tensor.js';
import { ReferenceBackend } from '../../src/backends/reference/index.js';
import { initParams, type TransformerParams } from '../../src/nn/transformer.js';
import { biccInput, conditionBatch } from '../../src/rl/bicc.js';
import { scoreRollouts } from '../../src/rl/rollout-scores.js';
import { sampleRollouts } from '../../src/rl/sampler.js';
import { scoreLogProbs } from '../../src/rl/score.js';
import type { SequenceBatch } from '../../src/rl/batch.js';
import { peakedParams, tinyConfig, tokenizer } from './helpers/fixtures.js';

/**
 * The scoring stage of an RL step: pi_old (the sampler's record, or re-scored where the backend is not
 * batch-invariant), pi_ref and BICC's conditioned pi_old, each what `scoreLogProbs` gives at the sampling
 * temperature, from one call that leaves no tensor behind.
 */
const PROMPTS = ['12+34=', '7*8=', '3,5,7:22='];
const config = tinyConfig({ maxSeqLen: 64 });
const params = peakedParams(config, 1);

/** The reference kernels under a backend that says its results depend on the batch's shape (as a GPU's do). */
function shapeDependentBackend(): ReferenceBackend {
  const backend = new ReferenceBackend();
  Object.defineProperty(backend, 'batchInvariant', { value: false });
  return backend;
}

const scored = (p: TransformerParams, batch: SequenceBatch, temperature: number): number[] => {
  const t = tidy(() => scoreLogProbs(p, config, batch, { temperature }));
  const values = Array.from(t.dataSync());
  t.dispose();
  return values;
};

const sample = (p: TransformerParams, temperature: number) =>
  sampleRollouts(p, config, tokenizer, PROMPTS, new Rng(8), { groupSize: 4, maxNewTokens: 8, temperature });

describe('scoreRollouts', () => {
  it("takes pi_old as the sampler recorded it on a batch-invariant backend; scores pi_ref and BICC's pi_old", async () => {
    const ref = peakedParams(config, 99);
    const ro = await sample(params, 0.9);
    const rewards = ro.promptIndex.map((_, r) => r % 2);
    const cond = conditionBatch(biccInput(ro, rewards), tokenizer, config, { placement: 'before-query' });
    expect(cond.conditioned.some(Boolean)).toBe(true);
    const scores = await scoreRollouts({ sampler: params, reference: ref }, config, ro, cond.batch);
    expect(scores.old).toBe(ro.sampledLogProbs);
    expect(Array.from(scores.reference!)).toEqual(scored(ref, ro, 0.9));
    expect(Array.from(scores.reference!)).not.toEqual(Array.from(scores.old));
    expect(Array.from(scores.conditionedOld!)).toEqual(scored(params, cond.batch, 0.9));
    dispose(ref);
  });

  it('gives null for a reference or a conditioned batch it was not given', async () => {
    const ro = await sample(params, 1);
    const scores = await scoreRollouts({ sampler: params, reference: null }, config, ro, null);
    expect(scores.reference).toBeNull();
    expect(scores.conditionedOld).toBeNull();
  });

  it('re-scores pi_old by the training forward where the backend is not batch-invariant', async () => {
    const backend = shapeDependentBackend();
    const onIt = initParams(config, new Rng(1), { std: 0.5, backend });
    const ro = await sample(onIt, 0.7);
    const scores = await scoreRollouts({ sampler: onIt, reference: null }, config, ro, null);
    expect(scores.old).not.toBe(ro.sampledLogProbs);
    // The reference kernels are in fact batch-invariant, so the re-score is the sampler's record bit for bit.
    expect(Array.from(scores.old)).toEqual(scored(onIt, ro, 0.7));
    expect(Array.from(scores.old)).toEqual(Array.from(ro.sampledLogProbs));
    dispose(onIt);
  });

  it('frees every tensor it creates', async () => {
    const ro = await sample(params, 1);
    const cond = conditionBatch(
      biccInput(
        ro,
        ro.promptIndex.map((_, r) => r % 2),
      ),
      tokenizer,
      config,
    );
    const before = liveTensors();
    await scoreRollouts({ sampler: params, reference: params }, config, ro, cond.batch, { remat: true });
    expect(liveTensors()).toBe(before);
  });
});
