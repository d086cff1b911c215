import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { optimalBaseline, rccAdvantages, rccBaseline, sequenceDeltas } from '../../src/objectives/rcc.js';

const binaryGroup = fc
  .integer({ min: 2, max: 16 })
  .chain((g) =>
    fc.tuple(
      fc.array(fc.constantFrom<number>(0, 1), { minLength: g, maxLength: g }),
      fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: g, maxLength: g }),
    ),
  );

describe('RCC baseline', () => {
  it('equals mean(r) when delta is constant within the group', () =>
    fc.assert(
      fc.property(binaryGroup, fc.double({ min: -5, max: 5, noNaN: true }), ([r], c) => {
        const m = r.reduce((s, x) => s + x, 0) / r.length;
        expect(
          Math.abs(
            rccBaseline(
              r,
              r.map(() => c),
            ) - m,
          ),
        ).toBeLessThan(1e-12);
      }),
    ));

  // b* = E[e^{2d} r] / E[e^{2d}] expands as mean(r) + 2 cov(r, d) + 2 E[(r - mean r)(d - mean d)^2] + O(d^3)
  // (the cumulants of r under the tilted weights), and b_RCC keeps the first two terms. So at scale s the difference
  // b_RCC - b* is -2 m3 s^2 up to a third-order rest. (A ratio test, "halving s quarters the error", fails when
  // m3 is close to 0: then the third-order term leads.)
  it('matches b* = E[w^2 r]/E[w^2] to second order: the difference is the next term, -2 E[(r - r̄)(δ - δ̄)²]', () =>
    fc.assert(
      fc.property(binaryGroup, ([r, d]) => {
        const spread = Math.max(...d) - Math.min(...d);
        fc.pre(spread > 1e-3 && r.some((x) => x !== r[0]));
        const n = r.length;
        const mr = r.reduce((a, x) => a + x, 0) / n;
        const md = d.reduce((a, x) => a + x, 0) / n;
        const m3 = r.reduce((a, x, j) => a + (x - mr) * (d[j]! - md) ** 2, 0) / n;
        for (const scale of [1e-2, 5e-3, 2.5e-3]) {
          const ds = d.map((x) => scale * x);
          const diff = rccBaseline(r, ds) - optimalBaseline(r, ds);
          // second order: bounded by the spread squared
          expect(Math.abs(diff)).toBeLessThanOrEqual(4 * (scale * spread) ** 2 + 1e-13);
          // and equal to its leading term up to third order (|r - r̄| <= 1, |2(d - d̄)| <= 2 spread)
          expect(Math.abs(diff + 2 * m3 * scale ** 2)).toBeLessThanOrEqual(8 * (scale * spread) ** 3 + 1e-13);
        }
      }),
    ));

  // b* = sum w^2 r / sum w^2 is a weighted mean of the rewards; a baseline outside [min r, max r] gives every
  // rollout of the group an advantage of the same sign, so the best one is pushed down (issue 21: RCC drove a
  // two-token task's reward to 0 once the policy had moved a few nats from the reference).
  it('stays within the group reward range, so the best rollout never gets a negative advantage', () =>
    fc.assert(
      fc.property(
        fc
          .integer({ min: 2, max: 16 })
          .chain((g) =>
            fc.tuple(
              fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: g, maxLength: g }),
              fc.array(fc.double({ min: -20, max: 20, noNaN: true }), { minLength: g, maxLength: g }),
            ),
          ),
        ([r, d]) => {
          const b = rccBaseline(r, d);
          expect(b).toBeGreaterThanOrEqual(Math.min(...r));
          expect(b).toBeLessThanOrEqual(Math.max(...r));
          const a = rccAdvantages(
            r,
            d,
            r.map(() => 0),
          );
          const best = r.indexOf(Math.max(...r));
          const worst = r.indexOf(Math.min(...r));
          expect(a[best]!).toBeGreaterThanOrEqual(0);
          expect(a[worst]!).toBeLessThanOrEqual(0);
        },
      ),
    ));

  it('one positive whose delta leads by 5 nats in a group of 8: b = 1 (unclamped 1.22), A+ = 0, A- < 0', () => {
    const r = [1, 0, 0, 0, 0, 0, 0, 0];
    const d = [5, 0, 0, 0, 0, 0, 0, 0];
    // mean r = 1/8, mean d = 5/8, Cov(r, d) = (1/8)[(7/8)(35/8) + 7 (-1/8)(-5/8)] = 35/64
    expect(0.125 + 2 * (35 / 64)).toBeCloseTo(1.21875, 12);
    expect(rccBaseline(r, d)).toBe(1);
    const a = rccAdvantages(
      r,
      d,
      r.map(() => 0),
    );
    expect(a[0]).toBe(0);
    for (const x of a.slice(1)) expect(x).toBeLessThan(0);
  });

  it('advantages: GRPO when delta is constant; zero for all-equal rewards; NaN rejected', () => {
    const r = [1, 0, 0, 1, 1, 1];
    const groups = [0, 0, 0, 1, 1, 1];
    const a = rccAdvantages(r, [0.3, 0.3, 0.3, -1, -1, -1], groups);
    const mean0 = 1 / 3;
    const std0 = Math.sqrt(((1 - mean0) ** 2 + 2 * mean0 ** 2) / 3);
    expect(a[0]).toBeCloseTo((1 - mean0) / (std0 + 1e-6), 12);
    expect(a.slice(3)).toEqual([0, 0, 0]);
    expect(() => rccAdvantages([Number.NaN, 1], [0, 0], [0, 0])).toThrow(T.NonFiniteError);
  });

  it('lowers the variance of the policy-gradient estimate when reward and delta correlate (simulated groups)', () => {
    // Each rollout: delta ~ N(0, 0.5), reward ~ Bernoulli(sigmoid(3 delta)) (confident rollouts are right more
    // often), a score-function draw s ~ N(0, 1) independent of both, w = exp(delta). One group's estimate is
    // (1/G) sum_i w_i s_i (r_i - b); we compare its variance over many groups for b = mean(r) and b = b_RCC.
    const rng = new T.Rng(7);
    const G = 8;
    const estimates = { mean: [] as number[], rcc: [] as number[] };
    for (let trial = 0; trial < 20_000; trial++) {
      const delta = Array.from({ length: G }, () => 0.5 * rng.normal());
      const r = delta.map((d): number => (rng.uniform() < 1 / (1 + Math.exp(-3 * d)) ? 1 : 0));
      const s = delta.map(() => rng.normal());
      const est = (b: number): number => delta.reduce((acc, d, i) => acc + Math.exp(d) * s[i]! * (r[i]! - b), 0) / G;
      estimates.mean.push(est(r.reduce((a, x) => a + x, 0) / G));
      estimates.rcc.push(est(rccBaseline(r, delta)));
    }
    const variance = (xs: number[]): number => {
      const m = xs.reduce((a, x) => a + x, 0) / xs.length;
      return xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1);
    };
    const [vMean, vRcc] = [variance(estimates.mean), variance(estimates.rcc)];
    expect(vRcc).toBeLessThan(vMean);
  });

  it('sequence deltas: masked sum and length-normalised mean of old - ref log-probs', () => {
    const old = [-1, -2, -3, -0.5, -0.5, 0];
    const ref = [-1.5, -2, -2, -1, -1, -9];
    const mask = [1, 1, 1, 1, 1, 0];
    expect(sequenceDeltas(old, ref, mask, 3, 'sum')).toEqual([0.5 + 0 - 1, 0.5 + 0.5]);
    expect(sequenceDeltas(old, ref, mask, 3, 'mean')).toEqual([(0.5 + 0 - 1) / 3, 1 / 2]);
  });
});
