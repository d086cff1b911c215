import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as E from 'fp-ts/lib/Either.js';
import { objectives, parseTrainConfig, Rng } from '../../src/index.js';
import {
  ABLATION_METHODS,
  GRID_NAMES,
  OBJECTIVE_METHODS,
  PILOT_METHODS,
  SCALES,
  plan,
  promptsFor,
  rlConfig,
  sweepMethod,
  warmStartConfig,
  type RlJob,
  type Scale,
} from '../../examples/experiments/grid.js';
import {
  binomialSe,
  markdownTable,
  mean,
  normalCdf,
  paired,
  pct,
  seedsForPower,
  std,
  verdict,
  verdictPower,
} from '../../examples/experiments/stats.js';
import {
  TraceAccumulator,
  baselineAdvantages,
  groupNormalisedWeights,
  traceCovarianceOf,
  withinGroupCorrelation,
} from '../../examples/experiments/variance.js';

describe('statistics of the report', () => {
  it('mean, sample std, binomial standard error', () => {
    expect(mean([1, 2, 3])).toBe(2);
    expect(std([1, 2, 3])).toBeCloseTo(1, 12);
    expect(std([5])).toBe(0);
    expect(binomialSe(0.5, 100)).toBeCloseTo(0.05, 12);
    expect(pct([0.5, 0.7])).toBe('60.0 ± 14.1');
    expect(pct([])).toBe('–');
  });

  it('paired comparison and the verdict rule', () => {
    // Consistent, large gains: holds (t = 0.1 / (0.01 / sqrt 3) = 17.3 > 2.92).
    const up = paired([0.6, 0.7, 0.8], [0.5, 0.61, 0.69]);
    expect(up.meanDiff).toBeCloseTo(0.1, 12);
    expect(up.wins).toBe(3);
    expect(verdict(up, 0.03)).toBe('holds');
    // Same gain but below the evaluation noise: not counted.
    expect(verdict(up, 0.2)).toBe('inconclusive');
    // Mixed signs: inconclusive.
    expect(verdict(paired([0.6, 0.5, 0.7], [0.5, 0.6, 0.65]))).toBe('inconclusive');
    // Consistent losses: contradicted.
    expect(verdict(paired([0.5, 0.61, 0.69], [0.6, 0.7, 0.8]), 0.03)).toBe('contradicted');
    // Identical differences: t is infinite, the sign decides.
    expect(paired([0.6, 0.7], [0.5, 0.6]).t).toBe(Infinity);
    expect(verdict(paired([0.6], [0.5]))).toBe('inconclusive');
  });

  it('the power analysis: normal CDF, seeds for 80% power, and the power of the verdict rule itself', () => {
    expect(normalCdf(0)).toBeCloseTo(0.5, 7);
    expect(normalCdf(1.644854)).toBeCloseTo(0.95, 6);
    expect(normalCdf(-1.959964)).toBeCloseTo(0.025, 6);
    // An effect of one std at 5% one-sided and 80%: 8 seeds (G*Power's paired t-test, normal approximation).
    expect(seedsForPower({ effect: 1, sd: 1, minEffect: 0, alpha: 0.05 })).toBe(8);
    // Half the effect needs about four times the seeds; an effect at the minimum effect never holds.
    expect(seedsForPower({ effect: 0.5, sd: 1, minEffect: 0, alpha: 0.05 })).toBeGreaterThanOrEqual(26);
    expect(seedsForPower({ effect: 0.04, sd: 0.01, minEffect: 0.04, alpha: 0.05 })).toBeNull();
    // Against the rule itself: experiments of n seeds drawn with the given effect and spread, judged by verdict().
    const rng = new Rng(5);
    for (const [q, n] of [
      [{ effect: 0.04, sd: 0.06, minEffect: 0.02, alpha: 0.05 }, 12],
      [{ effect: 0.04, sd: 0.06, minEffect: 0.035, alpha: 0.05 }, 30],
      [{ effect: 0.02, sd: 0.05, minEffect: 0, alpha: 0.05 / 7 }, 40],
    ] as const) {
      const trials = 4000;
      let holds = 0;
      for (let i = 0; i < trials; i++) {
        const d = Array.from({ length: n }, () => q.effect + q.sd * rng.normal());
        holds += verdict(paired(d, new Array(n).fill(0)), q.minEffect, q.alpha) === 'holds' ? 1 : 0;
      }
      expect(Math.abs(holds / trials - verdictPower(q, n))).toBeLessThan(0.04);
    }
  });

  it('markdown tables escape pipes and align columns', () => {
    const t = markdownTable(['a', 'b'], [['x|y', '1']]);
    expect(t.split('\n')).toEqual(['| a | b |', '| :--- | ---: |', '| x\\|y | 1 |']);
  });
});

describe('gradient-variance estimator', () => {
  it('the streaming trace of the covariance equals the two-pass one', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.double({ min: -10, max: 10, noNaN: true }), { minLength: 3, maxLength: 3 }), {
          minLength: 2,
          maxLength: 12,
        }),
        (vs) => {
          const acc = new TraceAccumulator();
          vs.forEach((v) => acc.add(v));
          const direct = traceCovarianceOf(vs);
          expect(acc.traceCovariance()).toBeCloseTo(direct, 6);
        },
      ),
    );
    const acc = new TraceAccumulator();
    [
      [1, 0],
      [3, 0],
      [2, 3],
    ].forEach((v) => acc.add(v));
    // mean (2, 1); deviations (-1,-1), (1,-1), (0,2): squared norms 2 + 2 + 4 = 8, / (3 - 1) = 4.
    expect(acc.traceCovariance()).toBeCloseTo(4, 12);
    expect(acc.meanSquaredNorm()).toBeCloseTo(5, 12);
  });

  it('weights have mean 1 per group; correlation is within groups', () => {
    const w = groupNormalisedWeights([0, Math.log(3), 5, 5], [0, 0, 1, 1]);
    expect(w[0]).toBeCloseTo(0.5, 12);
    expect(w[1]).toBeCloseTo(1.5, 12);
    expect(w[2]).toBeCloseTo(1, 12);
    // Between-group differences do not count: within each group, x and y move together.
    expect(withinGroupCorrelation([0, 1, 10, 11], [5, 6, -3, -2], [0, 0, 1, 1])).toBeCloseTo(1, 12);
    expect(withinGroupCorrelation([0, 0, 1, 1], [1, 2, 3, 4], [0, 0, 1, 1])).toBe(0);
  });

  it("with a constant delta, RCC and the exact baseline give GRPO's advantages", () => {
    const rewards = [1, 0, 0, 1, 1, 1, 0, 0];
    const groups = [0, 0, 0, 0, 1, 1, 1, 1];
    const grpo = objectives.groupAdvantages(rewards, groups, objectives.PAPER_ADVANTAGES);
    const rcc = objectives.rccAdvantages(
      rewards,
      rewards.map(() => 0.3),
      groups,
    );
    const exact = baselineAdvantages(rewards, groups, (idx) =>
      objectives.optimalBaseline(
        idx.map((i) => rewards[i]!),
        idx.map(() => 0.3),
      ),
    );
    rcc.forEach((a, i) => expect(a).toBeCloseTo(grpo[i]!, 5));
    exact.forEach((a, i) => expect(a).toBeCloseTo(grpo[i]!, 5));
    expect(baselineAdvantages([1, 1], [0, 0], () => 0.5)).toEqual([0, 0]);
  });
});

describe('the experiment plan', () => {
  const s = SCALES.small;
  const jobs = plan(s, GRID_NAMES, [0, 1, 2]);

  it('has no duplicate jobs and lists every dependency before its dependants', () => {
    const ids = jobs.map((j) => j.id);
    expect(new Set(ids).size).toBe(ids.length);
    const seen = new Set<string>();
    for (const j of jobs) {
      for (const d of j.deps) expect(seen.has(d)).toBe(true);
      seen.add(j.id);
    }
  });

  it('gives every RL configuration the same rollout budget and the same warm-start per task and seed', () => {
    const rl = jobs.filter((j): j is RlJob => j.kind === 'rl');
    for (const j of rl) {
      const cfg = rlConfig(s, j.task, j.method, j.seed, { resume: 'w', output: 'o' });
      const steps = j.method.steps ?? s.steps;
      // The variance study's shorter GRPO runs are the only ones with fewer steps; per step the budget is fixed.
      expect(cfg.promptsPerStep! * cfg.numGenerations!).toBe(s.promptsPerStep * s.numGenerations);
      if (!j.method.id.startsWith('grpo-steps')) expect(steps).toBe(s.steps);
      // Updates per step do not depend on G either.
      expect(cfg.promptsPerStep! / cfg.groupsPerMinibatch!).toBe(s.promptsPerStep / s.groupsPerMinibatch);
      expect(j.deps).toEqual([`warmstart/${j.task.id}/seed${j.seed}`]);
      expect(cfg.learningRate).toBe(s.learningRate);
    }
    expect(promptsFor({ ...OBJECTIVE_METHODS[0]!, numGenerations: 16 }, s)).toBe(8);
  });

  it('runs every objective on every task with each seed, and shares runs that are the same computation', () => {
    for (const task of s.tasks)
      for (const m of OBJECTIVE_METHODS)
        for (const seed of [0, 1, 2]) expect(jobs.some((j) => j.id === `rl/${task.id}/${m.id}/seed${seed}`)).toBe(true);
    expect(sweepMethod('tau', 10).id).toBe('conspo');
    expect(sweepMethod('margin', 0).id).toBe('conspo-nomargin');
    expect(sweepMethod('alpha', 1).objectiveOptions).toEqual({ alpha: 1 });
    expect(ABLATION_METHODS.map((m) => m.objectiveOptions)).toEqual([
      { contrast: 'linear' },
      { score: 'clipped-ratio' },
      { marginSchedule: 'none' },
      { marginSchedule: 'fixed' },
    ]);
    // Every objective config parses.
    for (const m of [...OBJECTIVE_METHODS, ...ABLATION_METHODS])
      expect(objectives.makeObjective(m.objective, m.objectiveOptions)._tag).toBe('Right');
  });

  it("the pilot runs on its own seeds only: the power analysis's four methods and RCC's variance points", () => {
    const pilot = plan(s, ['pilot'], [0, 1, 2]);
    expect(new Set(pilot.map((j) => j.seed))).toEqual(new Set(s.pilotSeeds));
    expect(s.pilotSeeds.some((seed) => seed < s.plannedSeeds)).toBe(false);
    for (const seed of s.pilotSeeds) {
      for (const id of PILOT_METHODS)
        expect(pilot.some((j) => j.id === `rl/${s.studyTask}/${id}/seed${seed}`)).toBe(true);
      for (const point of s.variancePoints.filter((p) => p > 0))
        expect(pilot.some((j) => j.id === `variance/${s.studyTask}/step${point}/seed${seed}`)).toBe(true);
    }
    // The full plan holds the pilot's jobs too, so a worker process finds any of them.
    for (const j of pilot) expect(jobs.some((x) => x.id === j.id)).toBe(true);
  });

  it('every job of every scale is a valid training config', () => {
    for (const scale of ['tiny', 'small', 'large'] as Scale[]) {
      const sc = SCALES[scale];
      for (const j of plan(sc, GRID_NAMES, [0, 1, 2])) {
        const input =
          j.kind === 'rl'
            ? rlConfig(sc, j.task, j.method, j.seed, { resume: 'w', output: 'o' })
            : warmStartConfig(sc, j.task, j.seed, 'o');
        const cfg = parseTrainConfig(input);
        if (E.isLeft(cfg)) throw new Error(`${scale} ${j.id}: ${cfg.left.message}`);
      }
      expect(sc.variancePrompts % sc.varianceGroupsPerMinibatch).toBe(0);
    }
  });
});

describe('Student t tail and critical values', () => {
  it('match tabulated values', async () => {
    const { tCritical, tUpperTail } = await import('../../examples/experiments/stats.js');
    // One-sided 5%: df 1 6.314, df 2 2.920, df 10 1.812; one-sided 0.5%: df 2 9.925.
    expect(tCritical(1, 0.05)).toBeCloseTo(6.314, 3);
    expect(tCritical(2, 0.05)).toBeCloseTo(2.92, 3);
    expect(tCritical(10, 0.05)).toBeCloseTo(1.812, 3);
    expect(tCritical(2, 0.005)).toBeCloseTo(9.925, 3);
    // df 2 has a closed form: P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2.
    for (const t of [-3, -0.5, 0, 0.7, 4.3])
      expect(tUpperTail(t, 2)).toBeCloseTo((1 - t / Math.sqrt(t * t + 2)) / 2, 12);
    expect(tUpperTail(Infinity, 2)).toBe(0);
  });
});
