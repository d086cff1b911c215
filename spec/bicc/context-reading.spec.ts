import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { seqLen } from '../../src/rl/batch.js';
import { biccInput, biccLogProbs, conditionBatch, contextLogRatio } from '../../src/rl/bicc.js';
import { contextWarmStartBatch, nearMiss } from '../../src/rl/bicc-warm-start.js';
import { scoreRollouts } from '../../src/rl/rollout-scores.js';
import { sampleRollouts } from '../../src/rl/sampler.js';
import { sftBatch, sftExamples } from '../../src/rl/sft.js';
import { additionTask, sampleProblems } from '../../src/tasks/index.js';
import { parseTrainConfig } from '../../src/training/config.js';
import { biccConditioning, interventions } from '../../src/training/interventions.js';
import { peakedParams, tinyConfig, tokenizer } from './helpers.js';

const task = additionTask({ digits: [3, 1] });
const config = tinyConfig();
const G = 4;
// Room for every trace uncut: budget 64, 57 tokens of room against at most 3 traces of 7 tokens and 4 separators.
const LAYOUT = { contextShare: 0.9, placement: 'before-query' as const };

/** The ids of a row's real tokens left of the completion block. */
function promptOf(batch: ReturnType<typeof sftBatch>, r: number): number[] {
  const t = seqLen(batch);
  const out: number[] = [];
  for (let j = 0; j < batch.promptLen; j++) if (batch.attentionMask[r * t + j]) out.push(batch.tokens[r * t + j]!);
  return out;
}

describe('the context-reading warm-start (issue 29)', () => {
  it('at share 0 is the plain batch of worked solutions and draws nothing from the generator', () => {
    const problems = sampleProblems(task, 16, new Rng(1));
    const rng = new Rng(9);
    const before = rng.state();
    const batch = contextWarmStartBatch(task, problems, tokenizer, config, rng, { share: 0, groupSize: G, bicc: {} });
    const plain = sftBatch(tokenizer, sftExamples(task, problems));
    expect(rng.state()).toEqual(before);
    expect([batch.promptLen, batch.completionLen]).toEqual([plain.promptLen, plain.completionLen]);
    expect(Array.from(batch.tokens)).toEqual(Array.from(plain.tokens));
    expect(Array.from(batch.completionMask)).toEqual(Array.from(plain.completionMask));
  });

  it("at share 1 puts BICC's context before every query: 1..G-1 traces, all right or all rejected", () => {
    const problems = sampleProblems(task, 64, new Rng(2));
    const batch = contextWarmStartBatch(task, problems, tokenizer, config, new Rng(3), {
      share: 1,
      groupSize: G,
      bicc: LAYOUT,
    });
    const plain = sftBatch(tokenizer, sftExamples(task, problems));
    const c = batch.completionLen;
    expect(c).toBe(plain.completionLen);
    const roles = new Set<string>();
    problems.forEach((p, r) => {
      // The completion block (the target) is the plain example's.
      expect(Array.from(batch.tokens.subarray(r * seqLen(batch) + batch.promptLen, (r + 1) * seqLen(batch)))).toEqual(
        Array.from(plain.tokens.subarray(r * seqLen(plain) + plain.promptLen, (r + 1) * seqLen(plain))),
      );
      // [S, t1, S, ..., tk, S, BOS, query] with S = [EOS]: the plain prompt follows the context.
      const prompt = promptOf(batch, r);
      const query = tokenizer.promptIds(p.prompt);
      expect(prompt.slice(prompt.length - query.length)).toEqual(query);
      const context = prompt.slice(0, prompt.length - query.length);
      expect(context[0]).toBe(tokenizer.eos);
      expect(context[context.length - 1]).toBe(tokenizer.eos);
      const pieces = splitOn(context.slice(1, -1), tokenizer.eos).map((ids) => tokenizer.decode(ids));
      expect(pieces.length).toBeGreaterThanOrEqual(1);
      expect(pieces.length).toBeLessThanOrEqual(G - 1);
      const right = pieces.every((s) => s === task.workedSolution(p));
      const rejected = pieces.every((s) => task.verify(s, p) === 0);
      expect(right || rejected).toBe(true);
      roles.add(right ? 'negative row (its positives)' : 'positive row (its negatives)');
    });
    expect(roles.size).toBe(2);
  });

  it('a near miss is the worked solution with one or two digits changed, and the verifier rejects it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const rng = new Rng(seed);
        const problems = sampleProblems(task, 4, rng);
        const p = problems[0]!;
        const s = nearMiss(task, p, problems, 0, rng);
        const right = task.workedSolution(p);
        expect(task.verify(s, p)).toBe(0);
        expect(s.length).toBe(right.length);
        const changed = [...s].flatMap((ch, i) => (ch === right[i] ? [] : [i]));
        expect(changed.length).toBeGreaterThanOrEqual(1);
        expect(changed.length).toBeLessThanOrEqual(2);
        for (const i of changed) expect(/[0-9]/.test(s[i]!) && /[0-9]/.test(right[i]!)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

function splitOn(ids: readonly number[], sep: number): number[][] {
  const out: number[][] = [[]];
  for (const id of ids) {
    if (id === sep) out.push([]);
    else out[out.length - 1]!.push(id);
  }
  return out;
}

describe("BICC's context log-ratio", () => {
  it('is the mean of log pi(o|q) - log pi(o|c,q) over the conditioned rows’ completion tokens (hand-computed)', () => {
    // Rows: 0 positive and conditioned, 1 negative and conditioned, 2 left plain. C = 2; row 1's second token masked.
    const plain = [-1, -2, -0.5, -9, -3, -3];
    const cond = [-2, -2.5, -1.5, 0, 0, 0];
    const mask = [1, 1, 1, 0, 1, 1];
    const r = contextLogRatio(plain, cond, mask, { conditioned: [true, true, false], positive: [true, false, true] });
    // Token differences: 1, 0.5 (row 0), 1 (row 1).
    expect(r.tokens).toBe(3);
    expect(r.mean).toBeCloseTo(2.5 / 3, 15);
    expect(r.meanAbs).toBeCloseTo(2.5 / 3, 15);
    expect(r.positive).toBeCloseTo(0.75, 15);
    expect(r.negative).toBeCloseTo(1, 15);
    expect(r.logMeanRatio).toBeCloseTo(Math.log((2 * Math.E + Math.exp(0.5)) / 3), 14);
    const none = contextLogRatio(plain, cond, mask, {
      conditioned: [false, false, false],
      positive: [true, true, true],
    });
    expect(none.tokens).toBe(0);
    expect(Number.isNaN(none.mean)).toBe(true);
  });
});

describe('unilateral BICC (sides): only one class conditioned, each row as bilateral BICC builds it', () => {
  it.each(['positives', 'negatives'] as const)('%s', async (sides) => {
    const params = peakedParams(config, 1, 'f32');
    const ro = await sampleRollouts(params, config, tokenizer, ['12+34=', '7*8=', '3,5,7:22='], new Rng(5), {
      groupSize: G,
      maxNewTokens: 10,
      temperature: 0.7,
    });
    const rewards = [1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0];
    const both = conditionBatch(biccInput(ro, rewards), tokenizer, config, { placement: 'before-query' });
    const one = conditionBatch(biccInput(ro, rewards), tokenizer, config, { placement: 'before-query', sides });
    const want = both.conditioned.map((c, r) => c && both.positive[r] === (sides === 'positives'));
    expect(one.conditioned).toEqual(want);
    expect(want.some(Boolean) && want.some((c, r) => !c && both.conditioned[r])).toBe(true);
    for (let r = 0; r < ro.batchSize; r++) {
      // A conditioned row is bilateral BICC's row; any other is the plain row.
      const prompt = promptOf(one.batch, r);
      expect(prompt).toEqual(want[r] ? promptOf(both.batch, r) : promptOf(ro, r));
    }
  });
});

describe('the two readings of the ratio (TrainConfig.biccRatio)', () => {
  const params = peakedParams(config, 1, 'f32');
  const PROMPTS = ['12+34=', '7*8=', '3,5,7:22='];
  // Groups 0 and 1 mixed, group 2 single-class (left plain).
  const rewards = [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0];

  it.each(['conditioned-policy', 'conditioned-old'] as const)(
    '%s: what the update scores and divides by',
    async (reading) => {
      const ro = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(5), {
        groupSize: G,
        maxNewTokens: 10,
        temperature: 0.7,
      });
      const parsed = parseTrainConfig({ bicc: true, biccRatio: reading, biccContextShare: 0.4 });
      if (parsed._tag === 'Left') throw parsed.left;
      const conditioned = biccConditioning(parsed.right, ro, rewards, tokenizer, config);
      const scores = await scoreRollouts({ sampler: params, reference: null }, config, ro, conditioned!.batch);
      const applied = interventions(parsed.right, ro, scores, conditioned, rewards, rewards);
      const cond = conditionBatch(biccInput(ro, rewards), tokenizer, config, {
        contextShare: 0.4,
        placement: 'before-query',
      });
      const condLp = biccLogProbs(params, config, cond, { temperature: ro.scoringTemperature });
      const condOld = Float32Array.from(condLp.dataSync());
      condLp.dispose();
      const c = ro.completionLen;
      // The record's log-ratio, restated: plain pi_old minus the conditioned forward, over conditioned rows' tokens.
      let sum = 0;
      let n = 0;
      for (let r = 0; r < ro.batchSize; r++)
        for (let j = 0; j < c; j++)
          if (cond.conditioned[r] && ro.completionMask[r * c + j]) {
            sum += ro.sampledLogProbs[r * c + j]! - condOld[r * c + j]!;
            n++;
          }
      expect(n).toBeGreaterThan(0);
      expect(applied.record.bicc_log_ratio).toBeCloseTo(sum / n, 5);
      if (reading === 'conditioned-policy') {
        // The paper's: the policy is scored on the conditioned rows; pi_old stays the sampler's.
        expect(Array.from(applied.oldLogProbs)).toEqual(Array.from(ro.sampledLogProbs));
        expect(Array.from(applied.sequences.tokens)).toEqual(Array.from(cond.batch.tokens));
      } else {
        // The authors' code's intent: the policy on the plain rows; pi_old under the context on conditioned rows only.
        expect(applied.sequences).toBe(ro);
        for (let r = 0; r < ro.batchSize; r++) {
          const row = (a: ArrayLike<number>): number[] => Array.from(a).slice(r * c, (r + 1) * c);
          expect(row(applied.oldLogProbs)).toEqual(row(cond.conditioned[r] ? condOld : ro.sampledLogProbs));
        }
        expect(cond.conditioned.some((x) => !x)).toBe(true);
      }
    },
  );
});
