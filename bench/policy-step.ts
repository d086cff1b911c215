/**
 * Times of the policy's hot paths on the default backend, for the default small model (smallConfig):
 * a supervised forward+backward+AdamW step, KV-cache sampling of a rollout batch, and the RL training forward
 * (scoreLogProbs) with its backward. Run: npx vite-node bench/policy-step.ts
 */
import { dispose, Rng, tidy, valueAndGrad, sum, mul } from '../src/index.js';
import { adamwInit, adamwStep, initParams, smallConfig, type TransformerParams } from '../src/nn/index.js';
import { sampleRollouts, scoreLogProbs, sftBatch, sftExamples, sftLoss } from '../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor } from '../src/tasks/index.js';

const task = additionTask();
const tok = tokenizerFor(task);
const config = smallConfig(tok.vocabSize);
let params = initParams(config, new Rng(0));
let opt = adamwInit(params);
const rng = new Rng(1);

async function time(label: string, reps: number, f: () => Promise<void> | void): Promise<void> {
  await f();
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) await f();
  console.log(`${label}: ${((performance.now() - t0) / reps).toFixed(0)} ms`);
}

const sft = sftBatch(tok, sftExamples(task, sampleProblems(task, 64, rng)));
console.log(`config ${JSON.stringify(config)}; SFT batch 64 x ${sft.promptLen + sft.completionLen} tokens`);
await time('SFT step (forward + backward + AdamW), 64 sequences', 5, () => {
  const out = tidy(() => {
    const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, config, sft))(params);
    return { loss, ...adamwStep(params, grads, opt, { lr: 1e-3 }) };
  });
  dispose([params, opt.m, opt.v, out.loss, out.gradNorm]);
  params = out.params;
  opt = out.state;
});
const prompts = sampleProblems(task, 8, rng).map((p) => p.prompt);
let ro = await sampleRollouts(params, config, tok, prompts, rng, { groupSize: 8, maxNewTokens: 8 });
await time('sampling 8 prompts x G=8, up to 8 new tokens (KV cache)', 5, async () => {
  ro = await sampleRollouts(params, config, tok, prompts, rng, { groupSize: 8, maxNewTokens: 8 });
});
await time('sampling the same without the KV cache (full re-runs)', 3, async () => {
  await sampleRollouts(params, config, tok, prompts, rng, { groupSize: 8, maxNewTokens: 8, useKvCache: false });
});
console.log(`rollout batch ${ro.batchSize} x ${ro.promptLen + ro.completionLen} tokens`);
await time('RL forward + backward (scoreLogProbs), 64 rollouts', 5, () => {
  tidy(() => valueAndGrad((p: TransformerParams) => sum(mul(scoreLogProbs(p, config, ro), 0.01)))(params));
});
