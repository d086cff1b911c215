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

  it('matches b* = E[w^2 r]/E[w^2] to second order: halving delta cuts the error about fourfold', () =>
    fc.assert(
      fc.property(binaryGroup, ([r, d]) => {
        const spread = Math.max(...d) - Math.min(...d);
        fc.pre(spread > 1e-3 && r.some((x) => x !== r[0]));
        const err = (s: number): number =>
          Math.abs(
            rccBaseline(
              r,
              d.map((x) => s * x),
            ) -
              optimalBaseline(
                r,
                d.map((x) => s * x),
              ),
          );
        const [e1, e2, e3] = [err(1e-2), err(5e-3), err(2.5e-3)];
        // O(delta^2): each halving divides the error by ~4 (O(delta) would divide by 2); the error is also bounded
        // by a constant times s^2 with the group's spread as the scale.
        expect(e2).toBeLessThanOrEqual(e1 / 3 + 1e-13);
        expect(e3).toBeLessThanOrEqual(e2 / 3 + 1e-13);
        expect(e1).toBeLessThanOrEqual(4 * (1e-2 * spread) ** 2 + 1e-13);
      }),
    ));

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
