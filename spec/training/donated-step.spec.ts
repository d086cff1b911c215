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
      const peak = backend.peakMemoryBytes() - before;
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
    // Everything else is the same but the tied embedding's gradient sums, which now count (the larger transient),
    // and the pools' quarter on top goes with them.
    expect(donating.gradientSums).toBe(2 * 4 * config.vocabSize * config.dModel);
    expect(functional.total - donating.total).toBe(1.25 * (functional.optimizerStep - donating.gradientSums));
    expect(T.describeEstimate(functional)).toContain('AdamW step');
    expect(T.describeEstimate(donating)).not.toContain('AdamW step');
    expect(T.describeEstimate(donating)).toContain("tied embedding's gradient sums");
    backend.dispose();
  });

  it("bounds a donating step of a model whose tied embedding dominates: the backward's gradient sums count", () => {
    // The LM head's and the lookup's gradients of a [8192, 64] embedding live beside their sum until valueAndGrad
    // returns: with the AdamW step's copies gone, that is the step's largest transient.
    const wide: T.TransformerConfig = { ...T.smallConfig(8192), dModel: 64, nLayers: 1, dFf: 128, maxSeqLen: 16 };
    const backend = new T.CpuBackend({ threads: 2 });
    const rng = new T.Rng(6);
    const tokens = Int32Array.from({ length: 2 * 16 }, () => 3 + Math.floor(rng.uniform() * 8000));
    const batch = {
      batchSize: 2,
      promptLen: 8,
      completionLen: 8,
      tokens,
      attentionMask: new Uint8Array(32).fill(1),
      completionMask: new Float32Array(16).fill(1),
    };
    let params = T.initParams(wide, rng, { backend });
    let opt = T.adamwInit(params);
    backend.resetPeakMemory();
    for (let s = 0; s < 2; s++) {
      const next = T.tidy(() => {
        const [loss, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sftLoss(p, wide, batch))(params);
        const stepped = T.adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 }, { donate: true });
        return { loss, params: stepped.params, opt: stepped.state };
      });
      next.loss.dispose();
      ({ params, opt } = next);
    }
    const e = T.estimateTrainingMemory(wide, {
      sampledRows: 2,
      minibatchRows: 2,
      promptTokens: 8,
      completionTokens: 8,
      withReference: false,
      donates: true,
    });
    const peak = backend.peakMemoryBytes();
    // Weights, moments and gradients (4 W) and the two extra embedding gradients were live at once.
    expect(peak).toBeGreaterThan(4 * 4 * e.parameters + e.gradientSums);
    expect(peak).toBeLessThanOrEqual(e.total);
    T.dispose([params, opt]);
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
      const peak = backend.peakMemoryBytes();
      T.dispose(result.params);
      backend.dispose();
      return { peak, estimate: estimate! };
    };
    const stops = await run('stop');
    const skips = await run('skip');
    const term = skips.estimate.optimizerStep;
    expect(term).toBe(3 * 4 * skips.estimate.trainableParameters);
    expect(stops.estimate.optimizerStep).toBe(0);
    expect(skips.estimate.total - stops.estimate.total).toBe(1.25 * (term - stops.estimate.gradientSums));
    // The functional step holds the weights, both moments, the gradients and the new copies at once: 7 W. The
    // donating run peaks in a backward instead: weights, moments, gradients and the activations (the estimate's
    // term, with its pools' quarter), 3 W less.
    const w = term / 3;
    expect(skips.peak).toBeGreaterThanOrEqual(7 * w);
    expect(stops.peak).toBeLessThanOrEqual(4 * w + 1.25 * stops.estimate.activations);
    expect(skips.peak - stops.peak).toBeGreaterThan(term - 1.25 * stops.estimate.activations);
  });
  it("counts an RL step's starting state only where the step does not donate and updates more than once", () => {
    const trained = 4 * T.countParameters(config);
    const at = (over: Partial<T.RunShape>): number => T.estimateTrainingMemory(config, { ...SHAPE, ...over }).stepStart;
    expect(at({})).toBe(0);
    expect(at({ stepRows: 2 })).toBe(0);
    expect(at({ stepRows: 3 })).toBe(3 * trained);
    expect(at({ stepRows: 2, epochs: 2 })).toBe(3 * trained);
    expect(at({ stepRows: 8, donates: true })).toBe(0);
  });

  it("a run that skips non-finite updates keeps each RL step's starting state beside several updates: counted", async () => {
    // Four minibatches an RL step, each an AdamW update: the step's starting weights and moments stay alive until
    // the step's result is checked (to drop it whole), beside the running state and each update's new copies.
    const task = T.withReward(T.additionTask(), (completion) => completion.length % 2);
    const cfg = tinyRun({
      model: { dModel: 256, nLayers: 4, nHeads: 4, nKvHeads: 2, dFf: 1024, maxSeqLen: 24 },
      onNonFinite: 'skip',
      warmStartSteps: 1,
      warmStartBatchSize: 2,
      steps: 2,
      promptsPerStep: 4,
      groupsPerMinibatch: 1,
      numGenerations: 2,
      evalPrompts: 1,
      evalK: 1,
      objective: 'grpo',
      objectiveOptions: { beta: 0.04 },
    });
    const backend = new T.CpuBackend({ threads: 2 });
    let estimate: T.MemoryEstimate | null = null;
    const result = await T.train(cfg, { backend, task, onMemoryEstimate: (e) => (estimate = e) });
    const e = estimate!;
    const w = 4 * e.trainableParameters;
    expect(e.stepStart).toBe(3 * w);
    expect(T.describeEstimate(e)).toContain("RL step's starting state");
    // At a later step's second update: the KL reference, the step's start, the last update's state, the new one
    // and the gradients, 11 W.
    expect(backend.peakMemoryBytes()).toBeGreaterThanOrEqual(11 * w);
    expect(backend.peakMemoryBytes()).toBeLessThanOrEqual(e.total - e.allocator);
    expect(backend.poolStats().heapBytes).toBeLessThanOrEqual(e.total);
    T.dispose(result.params);
    backend.dispose();
  });
});
