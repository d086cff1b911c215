import * as E from 'fp-ts/lib/Either.js';
import { loadCheckpoint, Rng, additionTask, tokenizerFor } from '../../src/index.js';
import { measureGradientVariance } from './variance.js';
const load = async (d: string) => { const c = await loadCheckpoint(d)(); if (E.isLeft(c)) throw c.left; return c.right; };
const ref = await load('runs/probe/add/reference');
const task = additionTask({ digits: 2 });
for (const dir of ['runs/probe/add-grpo-lr1g8/checkpoint', ]) {
  const pol = await load(dir);
  const t0 = performance.now();
  const m = await measureGradientVariance(pol.params, ref.params, pol.config, tokenizerFor(task), task, new Rng(10000), { prompts: 16, groupSize: 8, groupsPerMinibatch: 4, maxNewTokens: 8, temperature: 1 });
  console.log(dir, ((performance.now() - t0) / 1000).toFixed(1), 's', JSON.stringify(m));
}
