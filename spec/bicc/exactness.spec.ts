import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { tidy } from '../../src/core/scope.js';
import type { Tensor } from '../../src/core/tensor.js';
import { valueAndGrad } from '../../src/core/transforms.js';
import { tensor } from '../../src/ops/creation.js';
import type { TransformerParams } from '../../src/nn/transformer.js';
import type { RolloutBatch } from '../../src/objectives/index.js';
import { encodeCompletion, encodePrompt, packSequences, type SequenceBatch } from '../../src/rl/batch.js';
import { biccLogProbs, conditionBatch, type BiccOptions } from '../../src/rl/bicc.js';
import { scoreLogProbs } from '../../src/rl/score.js';
import { gradValues, objective, peakedParams, tinyConfig, tokenizer } from './helpers.js';

/**
 * "With an empty inserted context BICC reproduces the plain objective exactly": value and gradient w.r.t. every
 * parameter, compared with `toEqual` (bit for bit, f64), for GRPO (with a KL term, so single-class groups still
 * carry gradient) and ConSPO through `makeObjective`.
 */
const config = tinyConfig();
const params = peakedParams(config, 11);
const groups = [
  { q: '12+34=', o: ['\\boxed{46}', '\\boxed{45}', '\\boxed{4', '\\boxed{146}'] },
  { q: '7*8=', o: ['\\boxed{56}', '\\boxed{54}', '\\boxed{5', '\\boxed{56}'] },
  { q: '3,5,7:22=', o: ['\\boxed{3*5+7}', '\\boxed{3+5', '\\boxed{7}'] },
];
const rows = groups.flatMap((g, gi) =>
  g.o.map((o, i) => ({
    prompt: encodePrompt(tokenizer, g.q),
    completion: i === 2 ? tokenizer.encode(o) : encodeCompletion(tokenizer, o),
    group: gi,
  })),
);
const plain = packSequences(
  rows.map((r) => r.prompt),
  rows.map((r) => r.completion),
  tokenizer.pad,
);
const groupIds = rows.map((r) => r.group);
const b = plain.batchSize;
const c = plain.completionLen;

/** pi_old and pi_ref: the plain log-probs shifted by seeded noise (ratios between 0.7 and 1.4: some clipped, some not). */
function nearby(seed: number): Float64Array {
  const base = tidy(() => scoreLogProbs(params, config, plain)).dataSync();
  const rng = new Rng(seed);
  return Float64Array.from(base, (x, i) => (plain.completionMask[i] ? x + 0.35 * (rng.uniform() * 2 - 1) : 0));
}
const old = nearby(1);
const ref = nearby(2);

type Extra = Partial<Pick<RolloutBatch, 'advantages'>>;
function lossAndGrad(
  name: string,
  cfg: Record<string, unknown>,
  batch: SequenceBatch,
  rewards: number[],
  extra: Extra = {},
): { value: number; grads: number[][] } {
  const obj = objective(name, cfg);
  return tidy(() => {
    const f = (p: TransformerParams): Tensor =>
      obj.loss(
        {
          logProbs: batch === plain ? scoreLogProbs(p, config, plain) : biccLogProbs(p, config, batch),
          oldLogProbs: tensor(old, [b, c], { dtype: 'f64' }),
          refLogProbs: tensor(ref, [b, c], { dtype: 'f64' }),
          mask: tensor(plain.completionMask, [b, c], { dtype: 'f64' }),
          rewards,
          groupIds,
          ...extra,
        },
        { step: 10, totalSteps: 100 },
      ).loss;
    const [value, grads] = valueAndGrad(f)(params);
    return { value: value.itemSync(), grads: gradValues(grads) };
  });
}

const OBJECTIVES: [string, Record<string, unknown>][] = [
  ['grpo', { beta: 0.04 }],
  ['conspo', {}],
];
const mixed = [1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0];
const singleClass = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
const cases: [string, number[], Partial<BiccOptions>][] = [
  ['a context share too small for one separator and one token', mixed, { contextShare: 0.01 }],
  [
    'a budget with no room beyond the plain rows',
    mixed,
    { contextBudget: Math.min(...rows.map((r) => r.prompt.length)) + c + 2 },
  ],
  ['only single-class groups (every row falls back)', singleClass, {}],
];

describe('BICC with an empty inserted context', () => {
  it.each(cases)('reproduces the plain batch and objective exactly: %s', (_, rewards, opts) => {
    const cond = conditionBatch({ ...plain, rewards, groupIds }, tokenizer, config, opts);
    expect(cond.conditioned.every((x) => !x)).toBe(true);
    expect(cond.insertedTokens.every((x) => x === 0)).toBe(true);
    expect(cond.batch.promptLen).toBe(plain.promptLen);
    expect(Array.from(cond.batch.tokens)).toEqual(Array.from(plain.tokens));
    expect(Array.from(cond.batch.attentionMask)).toEqual(Array.from(plain.attentionMask));
    for (const [name, cfg] of OBJECTIVES) {
      const want = lossAndGrad(name, cfg, plain, rewards);
      const got = lossAndGrad(name, cfg, cond.batch, rewards);
      expect(got.value).toBe(want.value);
      expect(got.grads).toEqual(want.grads);
      if (name === 'grpo') expect(want.grads.some((g) => g.some((x) => x !== 0))).toBe(true);
    }
  });

  it('scores fallback rows exactly as the plain batch does although conditioned rows widen the prompt block', () => {
    // Group 0 is mixed (conditioned); groups 1 and 2 are single-class (plain rows, now with more left padding).
    const rewards = [1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0];
    const cond = conditionBatch({ ...plain, rewards, groupIds }, tokenizer, config);
    expect(cond.conditioned).toEqual(groupIds.map((g) => g === 0));
    expect(cond.batch.promptLen).toBeGreaterThan(plain.promptLen);
    const got = tidy(() => biccLogProbs(params, config, cond)).dataSync();
    const want = tidy(() => scoreLogProbs(params, config, plain)).dataSync();
    const fallback = rows.map((_, r) => r).filter((r) => !cond.conditioned[r]);
    for (const r of fallback)
      expect(Array.from(got.subarray(r * c, (r + 1) * c))).toEqual(Array.from(want.subarray(r * c, (r + 1) * c)));
    // GRPO with the conditioned rows' advantages set to 0: only the fallback rows carry the loss, in value and
    // in gradient, bit for bit, though the batch is wider and contains the conditioned rows.
    const advantages = rows.map((_row, r) => (cond.conditioned[r] ? 0 : [0.7, -0.4, 1.1, -1.3][r % 4]!));
    const plainRun = lossAndGrad('grpo', {}, plain, rewards, { advantages });
    const biccRun = lossAndGrad('grpo', {}, cond.batch, rewards, { advantages });
    expect(biccRun.value).toBe(plainRun.value);
    expect(biccRun.grads).toEqual(plainRun.grads);
    expect(plainRun.grads.some((g) => g.some((x) => x !== 0))).toBe(true);
  });
});
