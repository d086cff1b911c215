import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { tinyRun } from './helpers/tiny-run.js';

/**
 * The trainer gives each AdamW step the weights and moments before it (`adamwStep`'s `donate`) unless it must keep
 * them to skip a non-finite update (`onNonFinite: 'skip'`), and the memory estimate follows: its AdamW-step term,
 * 3 x the trained bytes, is 0 for a run that donates. Measured on the cpu backend: the term is exactly what a step of
 * the transformer's parameters saves at its peak, and what a whole run saves at its peak up to what the estimate
 * says the activations take.
 */
const config: T.TransformerConfig = {
  ...T.smallConfig(16),
  dModel: 128,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dFf: 384,
  maxSeqLen: 24,
};
const SHAPE: T.RunShape = {
  sampledRows: 2,
  minibatchRows: 2,
  promptTokens: 8,
  completionTokens: 8,
  withReference: false,
};

describe('a donated AdamW step in the memory estimate', () => {
  it("the estimate's AdamW-step term is what the update of the transformer's parameters saves at its peak", () => {
    const backend = new T.CpuBackend({ threads: 2 });
    const rng = new T.Rng(4);
    // The peak of the update itself, after the gradients' sum of squares (a scalar, and per-leaf partial sums).
    const rise = (donate: boolean): number => {
      const params = T.treeLeaves(T.initParams(config, rng, { backend }));
      const grads = params.map((p) => T.randn(p.shape, rng, { backend, std: 1e-2 }));
      const [m, v] = [params.map((p) => T.zerosLike(p)), params.map((p) => T.zerosLike(p))];
      const sumSq = T.sumSquares(grads);
      const hyper = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, step: 1, maxNorm: 1 };
      backend.resetPeakMemory();
      const before = backend.memory().bytes;
      const out = T.adamwUpdateMany(
        params,
        grads,
        m,
        v,
        sumSq,
        { ...hyper, weightDecays: params.map(() => 0.01) },
        {
          donate,
        },
      );
      const peak = backend.memory().peakBytes - before;
      T.dispose([params, grads, m, v, sumSq, out]);
      return peak;
    };
    const [functionalRise, donatedRise] = [rise(false), rise(true)];
    expect(donatedRise).toBe(0);
    const saved = functionalRise - donatedRise;
    const functional = T.estimateTrainingMemory(config, SHAPE);
    const donating = T.estimateTrainingMemory(config, { ...SHAPE, donates: true });
    expect(functional.optimizerStep).toBe(3 * 4 * T.countParameters(config));
    expect(donating.optimizerStep).toBe(0);
    expect(saved).toBe(functional.optimizerStep - donating.optimizerStep);
    // Everything else is the same, and the pools' quarter on top of the term goes with it.
    expect(functional.total - donating.total).toBe(1.25 * functional.optimizerStep);
    expect(T.describeEstimate(donating)).not.toContain('AdamW step');
    backend.dispose();
  });

  it('a run that stops on a non-finite update donates: its peak is lower by 3 x the weights, up to its activations', async () => {
    const task = T.withReward(T.additionTask(), (completion) => completion.length % 2);
    const model = { dModel: 128, nLayers: 2, nHeads: 4, nKvHeads: 2, dFf: 384, maxSeqLen: 24 };
    const run = async (onNonFinite: 'stop' | 'skip') => {
      const cfg = tinyRun({
        model,
        onNonFinite,
        warmStartSteps: 3,
        warmStartBatchSize: 2,
        steps: 2,
        promptsPerStep: 1,
        numGenerations: 2,
        evalPrompts: 1,
        evalK: 1,
        objective: 'grpo',
        objectiveOptions: {},
      });
      const backend = new T.CpuBackend({ threads: 2 });
      let estimate: T.MemoryEstimate | null = null;
      const result = await T.train(cfg, { backend, task, onMemoryEstimate: (e) => (estimate = e) });
      const peak = backend.memory().peakBytes;
      T.dispose(result.params);
      backend.dispose();
      return { peak, estimate: estimate! };
    };
    const stops = await run('stop');
    const skips = await run('skip');
    const term = skips.estimate.optimizerStep;
    expect(term).toBe(3 * 4 * skips.estimate.trainableParameters);
    expect(stops.estimate.optimizerStep).toBe(0);
    expect(skips.estimate.total - stops.estimate.total).toBe(1.25 * term);
    // The functional step holds the weights, both moments, the gradients and the new copies at once: 7 W. The
    // donating run peaks in a backward instead: weights, moments, gradients and the activations (the estimate's
    // term, with its pools' quarter), 3 W less.
    const w = term / 3;
    expect(skips.peak).toBeGreaterThanOrEqual(7 * w);
    expect(stops.peak).toBeLessThanOrEqual(4 * w + 1.25 * stops.estimate.activations);
    expect(skips.peak - stops.peak).toBeGreaterThan(term - 1.25 * stops.estimate.activations);
  });
});
