import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tensor } from '../../src/index.js';
import {
  aggregate,
  groupAdvantages,
  groupStats,
  parseLossType,
  type ScaleRewards,
  type StdMode,
} from '../../src/objectives/index.js';
import { expectAllClose, expectClose, f64, refAdvantages, refAggregate, rows, type RefLossType } from './helpers.js';

const arbRewards = fc.array(fc.integer({ min: 1, max: 10 }), { minLength: 1, maxLength: 5 }).chain((sizes) =>
  fc.tuple(
    fc.constant(sizes.flatMap((g, q) => new Array<number>(g).fill(100 - q))),
    fc.array(
      fc.oneof(
        fc.constantFrom(0, 1),
        fc.integer({ min: -300, max: 300 }).map((k) => k / 100),
      ),
      {
        minLength: sizes.reduce((a, b) => a + b, 0),
        maxLength: sizes.reduce((a, b) => a + b, 0),
      },
    ),
  ),
);

describe('advantages', () => {
  it('group / batch / none scaling, population / Bessel std, epsilon: equal to a plain loop', () => {
    fc.assert(
      fc.property(
        arbRewards,
        fc.constantFrom<ScaleRewards>('group', 'batch', 'none'),
        fc.constantFrom<StdMode>('population', 'bessel'),
        fc.constantFrom(0, 1e-4, 1e-6),
        ([ids, rewards], scale, std, eps) => {
          const got = groupAdvantages(rewards, ids, { scaleRewards: scale, stdMode: std, advantageEpsilon: eps });
          const want = refAdvantages(rewards, ids, { scale, std, eps });
          expectAllClose(got, want, 1e-12, 'A');
          got.forEach((a) => expect(Number.isFinite(a)).toBe(true));
        },
      ),
      { numRuns: 200 },
    );
  });

  it('a group of equal rewards has A = 0 exactly (also a group of one)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.double({ min: -5, max: 5, noNaN: true }),
        fc.constantFrom<ScaleRewards>('group', 'batch', 'none'),
        (g, r, scale) => {
          const a = groupAdvantages(new Array<number>(g).fill(r), new Array<number>(g).fill(0), {
            scaleRewards: scale,
            stdMode: 'bessel',
            advantageEpsilon: 0,
          });
          expect(a.every((x) => x === 0)).toBe(true);
        },
      ),
    );
    // 0.1 * 3 / 3 !== 0.1 in floating point: the mean must not leak an ulp into the advantages
    expect(
      groupAdvantages([0.1, 0.1, 0.1], [0, 0, 0], {
        scaleRewards: 'group',
        stdMode: 'population',
        advantageEpsilon: 0,
      }),
    ).toEqual([0, 0, 0]);
  });

  it('binary rewards, paper convention: A+ = sqrt((1-p)/p), A- = -sqrt(p/(1-p)) (Lemma 4)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }).chain((g) => fc.array(fc.constantFrom(0, 1), { minLength: g, maxLength: g })),
        (r) => {
          fc.pre(r.includes(0) && r.includes(1));
          const p = r.filter((x) => x === 1).length / r.length;
          const a = groupAdvantages(
            r,
            r.map(() => 0),
            { scaleRewards: 'group', stdMode: 'population', advantageEpsilon: 0 },
          );
          a.forEach((x, i) =>
            expectClose(x, r[i] === 1 ? Math.sqrt((1 - p) / p) : -Math.sqrt(p / (1 - p)), 1e-12, 'A'),
          );
        },
      ),
    );
  });

  it('group statistics: pass rate and zero-std flag', () => {
    const s = groupStats([1, 0, 1, 1, 1, 0.25], [7, 7, 7, 9, 9, 3]);
    expect(s.map((g) => [g.groupId, g.size, g.positives, g.passRate, g.rewardStd === 0])).toEqual([
      [7, 3, 2, 2 / 3, false],
      [9, 2, 2, 1, true],
      [3, 1, 0, 0, true],
    ]);
  });
});

describe('loss aggregation', () => {
  it('grpo / dapo / dr_grpo / bnpo equal their plain-loop definitions, zero-length rows included', () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 1, max: 6 })
          .chain((b) =>
            fc
              .integer({ min: 1, max: 6 })
              .chain((t) =>
                fc.tuple(
                  fc.constant([b, t] as const),
                  fc.array(fc.double({ min: -3, max: 3, noNaN: true }), { minLength: b * t, maxLength: b * t }),
                  fc.array(fc.constantFrom(0, 1), { minLength: b * t, maxLength: b * t }),
                ),
              ),
          ),
        fc.constantFrom<RefLossType>('grpo', 'dapo', 'dr_grpo', 'bnpo'),
        fc.integer({ min: 1, max: 12 }),
        ([[b, t], x, m], type, lmax) => {
          const got = aggregate(f64(x, [b, t]), f64(m, [b, t]), type, {
            rows: b,
            maxCompletionLength: lmax,
          }).itemSync();
          const shape = { b, t };
          expectClose(got, refAggregate(rows(shape, x), rows(shape, m), type, { rows: b, maxLen: lmax }), 1e-12, type);
          expect(Number.isFinite(got)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('dapo normalises by num_items_in_batch when given', () => {
    const x = tensor([1, 2, 3, 4], [2, 2], { dtype: 'f64' });
    const m = tensor([1, 1, 1, 0], [2, 2], { dtype: 'f64' });
    expect(aggregate(x, m, 'dapo', { rows: 2, maxCompletionLength: 2, numItemsInBatch: 12 }).itemSync()).toBe(0.5);
    expect(aggregate(x, m, 'bnpo', { rows: 2, maxCompletionLength: 2 }).itemSync()).toBe(2);
  });

  it('TRL and verl names map to the same modes', () => {
    expect(parseLossType('seq-mean-token-mean')).toBe('grpo');
    expect(parseLossType('token-mean')).toBe('dapo');
    expect(parseLossType('seq-mean-token-sum-norm')).toBe('dr_grpo');
    expect(parseLossType('bnpo')).toBe('bnpo');
    expect(parseLossType('mean')).toBeUndefined();
  });
});
