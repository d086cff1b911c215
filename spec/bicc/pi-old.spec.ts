import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { dispose, tidy } from '../../src/core/scope.js';
import { tensor } from '../../src/ops/creation.js';
import { validateBatch, type RolloutBatch } from '../../src/objectives/index.js';
import { biccInput, biccLogProbs, conditionBatch } from '../../src/rl/bicc.js';
import { scoreRollouts } from '../../src/rl/rollout-scores.js';
import { sampleRollouts } from '../../src/rl/sampler.js';
import { objective, peakedParams, tinyConfig, tokenizer } from './helpers.js';

/**
 * pi_old and pi_ref stay on the plain context. With f32 rollouts from the real sampler and the scoring stage, the
 * log-probs recorded at sampling are what the objective batch carries (untouched by conditioning), so on the first iteration the
 * ratio is exactly 1 on fallback rows (they are the plain rows, and a row scores bit for bit under any left
 * padding) and not identically 1 on conditioned rows (their new log-probs see the opposite class).
 */
const config = tinyConfig();
const params = peakedParams(config, 1, 'f32');
const ref = peakedParams(config, 2, 'f32');
const PROMPTS = ['12+34=', '7*8=', '3,5,7:22='];
const G = 4;
// Groups 0 and 1 mixed, group 2 single-class (falls back to the plain context).
const rewards = [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0];

describe('BICC leaves pi_old and pi_ref on the plain context', () => {
  it.each([1, 0.7])(
    'first-iteration ratio: exactly 1 on fallback rows, not 1 on conditioned rows (temperature %f)',
    async (temperature) => {
      const ro = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(5), {
        groupSize: G,
        maxNewTokens: 10,
        temperature,
      });
      const scores = await scoreRollouts({ sampler: params, reference: ref }, config, ro, null);
      const before = {
        old: Array.from(scores.old),
        ref: Array.from(scores.reference!),
        tokens: Array.from(ro.tokens),
      };
      const cond = conditionBatch(biccInput(ro, rewards), tokenizer, config);
      expect(cond.conditioned).toEqual(ro.promptIndex.map((i) => i !== 2));
      // Conditioning reads the rollouts and changes nothing in them.
      expect({
        old: Array.from(scores.old),
        ref: Array.from(scores.reference!),
        tokens: Array.from(ro.tokens),
      }).toEqual(before);

      const b = ro.batchSize;
      const c = ro.completionLen;
      const batch: RolloutBatch = {
        logProbs: biccLogProbs(params, config, cond, { temperature: ro.scoringTemperature }),
        oldLogProbs: tensor(scores.old, [b, c]),
        refLogProbs: tensor(scores.reference!, [b, c]),
        mask: tensor(ro.completionMask, [b, c]),
        rewards,
        groupIds: ro.promptIndex,
      };
      expect(E.isRight(await validateBatch(batch))).toBe(true);
      // The objective's pi_old / pi_ref are the scoring stage's arrays (pi_old the sampler's), value for value.
      expect(Array.from(batch.oldLogProbs!.dataSync())).toEqual(before.old);
      expect(Array.from(batch.refLogProbs!.dataSync())).toEqual(before.ref);

      const lp = batch.logProbs.dataSync();
      for (let r = 0; r < b; r++) {
        const logRatios: number[] = [];
        for (let j = 0; j < c; j++)
          if (ro.completionMask[r * c + j]) logRatios.push(lp[r * c + j]! - scores.old[r * c + j]!);
        if (cond.conditioned[r]) expect(Math.max(...logRatios.map(Math.abs))).toBeGreaterThan(1e-3);
        else expect(logRatios.map((x) => Math.exp(x))).toEqual(logRatios.map(() => 1));
      }
      // And the objective runs on it (GRPO with a KL term reads pi_ref).
      const loss = tidy(() => objective('grpo', { beta: 0.04 }).loss(batch).loss.itemSync());
      expect(Number.isFinite(loss)).toBe(true);
      dispose([batch.logProbs, batch.oldLogProbs!, batch.refLogProbs!, batch.mask]);
    },
  );
});
