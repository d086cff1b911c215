// Also run by vite-node (resume-child.ts), outside vitest's setup file: install the default backend.
import '../../../src/backends/registry.js';
import { Rng } from '../../../src/core/rng.js';
import { dispose, tidy } from '../../../src/core/scope.js';
import type { Tensor } from '../../../src/core/tensor.js';
import { valueAndGrad } from '../../../src/core/transforms.js';
import { tensor } from '../../../src/ops/creation.js';
import { div, mul, sub } from '../../../src/ops/elementwise.js';
import { sum } from '../../../src/ops/reduce.js';
import { initParams, type TransformerParams } from '../../../src/nn/transformer.js';
import { adamwInit, adamwStep, type AdamWConfig, type OptimizerState } from '../../../src/nn/optim.js';
import { sampleRollouts } from '../../../src/rl/sampler.js';
import { scoreLogProbs } from '../../../src/rl/score.js';
import { sftBatch, sftExamples, sftLoss } from '../../../src/rl/sft.js';
import { additionTask, sampleProblems } from '../../../src/tasks/index.js';
import { tinyConfig, tokenizer } from './fixtures.js';

/**
 * A miniature RL-style training run whose every step depends on all the state a checkpoint must carry: the
 * parameters, the AdamW moments and step (the schedule), and the RNG (which problems, which rollouts).
 */
export const config = tinyConfig({ dModel: 16, nLayers: 1, maxSeqLen: 24 });
export const optConfig: AdamWConfig = {
  lr: 0,
  weightDecay: 0.1,
  maxGradNorm: 1,
  schedule: { peakLr: 3e-3, warmupSteps: 2, totalSteps: 10, minLr: 1e-4 },
};
const task = additionTask({ digits: 1 });

export interface RunState {
  readonly params: TransformerParams;
  readonly opt: OptimizerState<TransformerParams>;
  readonly rng: Rng;
}

export const initRun = (seed: number): RunState => {
  const params = initParams(config, new Rng(seed));
  return { params, opt: adamwInit(params), rng: new Rng(seed + 1) };
};

/** One step; returns the loss it computed (before its update) and the next state. Disposes the old state. */
export async function trainStep(s: RunState): Promise<{ loss: number; next: RunState }> {
  const problems = sampleProblems(task, 3, s.rng);
  const ro = await sampleRollouts(
    s.params,
    config,
    tokenizer,
    problems.map((p) => p.prompt),
    s.rng,
    { groupSize: 2, maxNewTokens: 5, temperature: 1 },
  );
  const rewards = ro.completions.map((c, r) => task.verify(c, problems[ro.promptIndex[r]!]!) - 0.5);
  const sft = sftBatch(tokenizer, sftExamples(task, problems));
  const objective = (p: TransformerParams): Tensor => {
    const pg = sum(mul(scoreLogProbs(p, config, ro), tensor(rewards, [ro.batchSize, 1])));
    return sub(sftLoss(p, config, sft), div(mul(pg, 0.1), ro.batchSize));
  };
  const { loss, out } = tidy(() => {
    const [value, grads] = valueAndGrad(objective)(s.params);
    return { loss: value, out: adamwStep(s.params, grads, s.opt, optConfig) };
  });
  const lossValue = (await loss.data())[0]!;
  dispose([loss, out.gradNorm, s.params, s.opt.m, s.opt.v]);
  return { loss: lossValue, next: { params: out.params, opt: out.state, rng: s.rng } };
}
