import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { tensor, valueAndGrad, type Tensor } from '../../src/index.js';
import {
  BatchError,
  checkBatch,
  LOG_RATIO_BOUND,
  makeObjective,
  OBJECTIVE_NAMES,
  validateBatch,
  type ObjectiveName,
  type RolloutBatch,
} from '../../src/objectives/index.js';
import { arbRaw, arbShape, f64, groupsOf, toBatch, type Raw } from './helpers.js';

/** Every registered objective, with its KL term off (the KL has its own gradient whatever the rewards). */
const NO_KL: Record<ObjectiveName, Record<string, unknown>> = {
  grpo: {},
  dapo: {},
  dr_grpo: {},
  gspo: {},
  gmpo: {},
  cispo: {},
  sapo: {},
  disco: { beta: 0 },
  conspo: {},
};

function lossAndGrad(
  name: ObjectiveName,
  raw: Raw,
  extra: Partial<RolloutBatch> = {},
  cfg: Record<string, unknown> = NO_KL[name],
  dtype: 'f32' | 'f64' = 'f64',
): [number, Float64Array] {
  const obj = makeObjective(name, cfg);
  if (E.isLeft(obj)) throw obj.left;
  const t = (xs: readonly number[]): Tensor => tensor([...xs], [raw.b, raw.t], { dtype });
  const tensors = { oldLogProbs: t(raw.old), refLogProbs: t(raw.ref), mask: t(raw.mask) };
  const [v, g] = valueAndGrad(
    (lp: Tensor) => obj.right.loss(toBatch(raw, lp, { ...tensors, ...extra }), { step: 500, totalSteps: 1000 }).loss,
  )(t(raw.logp));
  return [v.itemSync(), Float64Array.from(g.dataSync())];
}

const allZero = (g: Float64Array): boolean => g.every((x) => x === 0);

describe('degenerate input is defined, not NaN', () => {
  it('all-equal rewards: finite loss 0 and exactly zero gradient, for every objective', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape()),
        fc.constantFrom(0, 1, 0.5, -2),
        fc.constantFrom(...OBJECTIVE_NAMES),
        (raw0, r, name) => {
          const raw = { ...raw0, rewards: raw0.rewards.map(() => r) };
          const [v, g] = lossAndGrad(name, raw);
          expect(Number.isFinite(v)).toBe(true);
          // CISPO's and GRPO's surrogates are 0 when A = 0; the contrastive ones have no valid group.
          expect(Math.abs(v)).toBe(0);
          expect(allZero(g)).toBe(true);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('ConSPO and DisCO skip groups with N+ = 0 or N- = 0: their rows get zero gradient, the others do not', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape({ maxGroups: 4 }), { rewards: 'binary-any', allowEmpty: false }),
        fc.constantFrom<ObjectiveName>('conspo', 'disco'),
        (raw, name) => {
          const [v, g] = lossAndGrad(name, raw);
          expect(Number.isFinite(v)).toBe(true);
          for (const rows of groupsOf(raw.groupIds)) {
            const skipped = rows.every((i) => raw.rewards[i] === 1) || rows.every((i) => raw.rewards[i] === 0);
            for (const i of rows)
              for (let t = 0; t < raw.t; t++) {
                const k = i * raw.t + t;
                if (skipped || !raw.mask[k]) expect(g[k]).toBe(0);
              }
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('zero-length completions contribute zero; padding may hold NaN or Inf and changes nothing', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape(), { rewards: 'binary' }),
        fc.constantFrom(...OBJECTIVE_NAMES),
        fc.constantFrom(NaN, Infinity, -Infinity, 123),
        (raw, name, junk) => {
          const dirty: Raw = {
            ...raw,
            logp: raw.logp.map((x, k) => (raw.mask[k] ? x : junk)),
            old: raw.old.map((x, k) => (raw.mask[k] ? x : -junk)),
            ref: raw.ref.map((x, k) => (raw.mask[k] ? x : junk)),
          };
          const [v0, g0] = lossAndGrad(name, raw);
          const [v1, g1] = lossAndGrad(name, dirty);
          expect(Number.isFinite(v1)).toBe(true);
          expect(v1).toBe(v0);
          g1.forEach((x, k) => {
            expect(Number.isFinite(x)).toBe(true);
            expect(x).toBe(g0[k]);
            if (!raw.mask[k]) expect(x).toBe(0);
          });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('a batch whose masks are all zero: loss 0 and zero gradient for every objective', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), fc.constantFrom(...OBJECTIVE_NAMES), (raw0, name) => {
        const raw = { ...raw0, mask: raw0.mask.map(() => 0) };
        const [v, g] = lossAndGrad(name, raw);
        expect(Math.abs(v)).toBe(0);
        expect(allZero(g)).toBe(true);
      }),
      { numRuns: 40 },
    );
  });

  it('a single group works for every objective', () => {
    const raw: Raw = {
      b: 3,
      t: 2,
      logp: [-1, -2, -0.5, -0.7, -3, -0.1],
      old: [-1.2, -1.8, -0.5, -1.7, -2, -0.4],
      ref: [-1, -1, -1, -1, -1, -1],
      mask: [1, 1, 1, 0, 1, 1],
      rewards: [1, 0, 0],
      groupIds: [42, 42, 42],
    };
    for (const name of OBJECTIVE_NAMES) {
      const [v, g] = lossAndGrad(name, raw);
      expect(Number.isFinite(v)).toBe(true);
      expect(g.some((x) => x !== 0)).toBe(true);
    }
  });
});

describe('log-ratios past the bound (python/rlvr_objectives states the same)', () => {
  /** The batch with the log-ratios l - l_old (and l_ref - l) of the chosen completion tokens set to +-size. */
  const pushed = (raw: Raw, at: readonly number[], signs: readonly number[], size: number): Raw => ({
    ...raw,
    old: raw.old.map((x, k) => (at.includes(k) ? raw.logp[k]! - signs[k % signs.length]! * size : x)),
    ref: raw.ref.map((x, k) => (at.includes(k) ? raw.logp[k]! + signs[(k + 1) % signs.length]! * size : x)),
  });
  const configs = (name: ObjectiveName): Record<string, unknown>[] =>
    ['grpo', 'dapo', 'dr_grpo'].includes(name)
      ? [NO_KL[name], { dualClip: 3 }, { beta: 0.04 }]
      : name === 'disco'
        ? [NO_KL[name], { beta: 0, score: 'l-ratio', klEstimator: 'k3' }]
        : name === 'conspo'
          ? [NO_KL[name], { score: 'clipped-ratio', beta: 0.04 }]
          : [NO_KL[name], { beta: 0.04 }];

  it('a log-ratio of +-100 in f32 gives a finite loss and gradient for every objective (exp(100) is Infinity in f32)', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape(), { rewards: 'binary', allowEmpty: false }),
        fc.constantFrom(...OBJECTIVE_NAMES),
        fc.array(fc.constantFrom(1, -1), { minLength: 3, maxLength: 3 }),
        fc.nat(),
        (raw, name, signs, seed) => {
          const on = raw.mask.flatMap((m, k) => (m ? [k] : []));
          const at = on.filter((_, j) => (j + seed) % 2 === 0);
          for (const cfg of configs(name)) {
            const [v, g] = lossAndGrad(name, pushed(raw, at, signs, 100), {}, cfg, 'f32');
            expect(Number.isFinite(v), `${name} ${JSON.stringify(cfg)} loss ${v}`).toBe(true);
            for (const x of g) expect(Number.isFinite(x), `${name} ${JSON.stringify(cfg)} grad`).toBe(true);
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it('every log-ratio past +-LOG_RATIO_BOUND counts as the bound: 25 and 1000 give the same loss and gradient', () => {
    expect(LOG_RATIO_BOUND).toBe(20);
    fc.assert(
      fc.property(
        arbRaw(arbShape(), { rewards: 'binary', allowEmpty: false }),
        fc.constantFrom(...OBJECTIVE_NAMES),
        fc.array(fc.constantFrom(1, -1), { minLength: 3, maxLength: 3 }),
        (raw, name, signs) => {
          const at = raw.mask.flatMap((m, k) => (m ? [k] : []));
          for (const cfg of configs(name)) {
            const [v25, g25] = lossAndGrad(name, pushed(raw, at, signs, 25), {}, cfg);
            const [v1000, g1000] = lossAndGrad(name, pushed(raw, at, signs, 1000), {}, cfg);
            expect(Number.isFinite(v25)).toBe(true);
            expect(v1000, `${name} ${JSON.stringify(cfg)}`).toBe(v25);
            g1000.forEach((x, k) => expect(x, `${name} ${JSON.stringify(cfg)} grad[${k}]`).toBe(g25[k]));
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('rejected input', () => {
  it('NaN or infinite rewards are a BatchError naming the field and index, for every objective', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape(), { rewards: 'binary' }),
        fc.constantFrom(NaN, Infinity, -Infinity),
        fc.nat(),
        fc.constantFrom(...OBJECTIVE_NAMES),
        (raw, bad, at, name) => {
          const idx = at % raw.b;
          const rewards = raw.rewards.map((r, i) => (i === idx ? bad : r));
          let caught: unknown;
          try {
            lossAndGrad(name, { ...raw, rewards });
          } catch (e) {
            caught = e;
          }
          expect(caught).toBeInstanceOf(BatchError);
          expect((caught as BatchError).field).toBe('rewards');
          expect((caught as BatchError).index).toBe(idx);
          expect((caught as BatchError).kind).toBe('non-finite');
        },
      ),
      { numRuns: 40 },
    );
  });

  it('validateBatch rejects NaN/Inf log-probs at completion tokens (field and flat index), ignores padding, checks the mask', async () => {
    const raw: Raw = {
      b: 2,
      t: 2,
      logp: [-1, NaN, -0.5, -0.7],
      old: [-1, -1, -1, Infinity],
      ref: [-1, -1, -1, -1],
      mask: [1, 0, 1, 1],
      rewards: [1, 0],
      groupIds: [0, 0],
    };
    const r1 = await validateBatch(toBatch(raw));
    expect(E.isLeft(r1) && r1.left.field === 'oldLogProbs' && r1.left.index === 3).toBe(true);
    const r2 = await validateBatch(toBatch({ ...raw, old: [-1, -1, -1, -1] }));
    expect(E.isRight(r2)).toBe(true); // the NaN sits in padding
    const r3 = await validateBatch(toBatch({ ...raw, logp: [-1, -1, -Infinity, -1] }));
    expect(E.isLeft(r3) && r3.left.field === 'logProbs' && r3.left.index === 2 && r3.left.kind === 'non-finite').toBe(
      true,
    );
    const r4 = await validateBatch(toBatch({ ...raw, old: [-1, -1, -1, -1], mask: [1, 0.5, 1, 1] }));
    expect(E.isLeft(r4) && r4.left.field === 'mask' && r4.left.index === 1).toBe(true);
  });

  it('shape and length mismatches are BatchErrors naming the field', () => {
    const raw: Raw = {
      b: 2,
      t: 2,
      logp: [-1, -1, -1, -1],
      old: [-1, -1, -1, -1],
      ref: [-1, -1, -1, -1],
      mask: [1, 1, 1, 1],
      rewards: [1, 0],
      groupIds: [0, 0],
    };
    const field = (b: RolloutBatch): string | undefined => {
      try {
        checkBatch(b);
        return undefined;
      } catch (e) {
        return (e as BatchError).field;
      }
    };
    expect(field(toBatch(raw))).toBeUndefined();
    expect(field({ ...toBatch(raw), rewards: [1] })).toBe('rewards');
    expect(field({ ...toBatch(raw), groupIds: [0, 0, 0] })).toBe('groupIds');
    expect(field({ ...toBatch(raw), mask: f64([1, 1], [1, 2]) })).toBe('mask');
    expect(field({ ...toBatch(raw), advantages: [0, NaN] })).toBe('advantages');
    expect(() => makeObjectiveOrThrow('grpo', { num_generations: 3 }).loss(toBatch(raw))).toThrow(BatchError);
    expect(() => makeObjectiveOrThrow('grpo', { beta: 0.1 }).loss({ ...toBatch(raw), refLogProbs: undefined })).toThrow(
      /refLogProbs/,
    );
  });
});

function makeObjectiveOrThrow(name: string, cfg: Record<string, unknown>) {
  const r = makeObjective(name, cfg);
  if (E.isLeft(r)) throw r.left;
  return r.right;
}
