import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import * as E from 'fp-ts/lib/Either.js';
import { valueAndGrad, type Tensor } from '../../src/index.js';
import {
  applySoftOverlong,
  DAPO_DEFAULTS,
  DR_GRPO_DEFAULTS,
  dynamicSamplingKeep,
  grpoLoss,
  GRPO_DEFAULTS,
  parseGrpoConfig,
  softOverlongPenalty,
  type GrpoConfig,
} from '../../src/objectives/index.js';
import {
  arbRaw,
  arbShape,
  expectAllClose,
  expectClose,
  f64,
  finiteDiff,
  refGrpoLoss,
  toBatch,
  type Raw,
  type RefGrpo,
} from './helpers.js';

// Tolerances: values are the same arithmetic in a different order (f64): 1e-10. Gradients are compared with
// central finite differences of the plain-loop reference (h = 1e-6): truncation ~h^2 and rounding ~1e-16/h
// give ~1e-9; 1e-6 leaves room, and inputs keep 1e-4 away from every kink of the clip.

const lossTypes = ['grpo', 'dapo', 'dr_grpo', 'bnpo'] as const;

const arbCfg = fc.record({
  epsilon: fc.double({ min: 0.05, max: 0.5, noNaN: true }),
  epsilonHigh: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
  beta: fc.oneof(fc.constant(0), fc.double({ min: 0.001, max: 0.5, noNaN: true })),
  lossType: fc.constantFrom(...lossTypes),
  dualClip: fc.option(fc.double({ min: 1.5, max: 4, noNaN: true }), { nil: null }),
  delta: fc.option(fc.double({ min: 1.8, max: 4, noNaN: true }), { nil: null }),
  scaleRewards: fc.constantFrom('group', 'batch', 'none'),
  stdMode: fc.constantFrom('population', 'bessel'),
  advantageEpsilon: fc.constantFrom(0, 1e-4, 1e-6),
}) as fc.Arbitrary<Partial<GrpoConfig>>;

function parsed(input: Partial<GrpoConfig>, defaults: GrpoConfig = GRPO_DEFAULTS): GrpoConfig {
  const r = parseGrpoConfig(input);
  if (E.isLeft(r)) throw r.left;
  return { ...defaults, ...r.right, ...input } as GrpoConfig;
}

function refOptions(c: GrpoConfig, raw: Raw): RefGrpo {
  return {
    eps: c.epsilon,
    epsHigh: c.epsilonHigh,
    beta: c.beta,
    lossType: c.lossType,
    dualClip: c.dualClip,
    delta: c.delta,
    adv: { scale: c.scaleRewards, std: c.stdMode, eps: c.advantageEpsilon },
    ...(c.dynamicSampling ? { keep: dynamicSamplingKeep(raw.rewards, raw.groupIds) } : {}),
  };
}

const kinksOf = (c: GrpoConfig): number[] => [
  Math.log(1 - c.epsilon),
  Math.log(1 + c.epsilonHigh),
  ...(c.delta ? [Math.log(c.delta)] : []),
  ...(c.dualClip ? [Math.log(c.dualClip)] : []),
];

function lossAndGrad(raw: Raw, cfg: GrpoConfig): [number, Float64Array] {
  const f = valueAndGrad((lp: Tensor) => grpoLoss(toBatch(raw, lp), cfg).loss);
  const [v, g] = f(f64(raw.logp, [raw.b, raw.t]));
  return [v.itemSync(), g.dataSync() as Float64Array];
}

describe('GRPO family against a plain-loop reference', () => {
  it('GRPO with every option: value and gradient w.r.t. the log-probs', () => {
    fc.assert(
      fc.property(
        arbCfg.chain((input) => {
          const cfg = parsed(input);
          return fc.tuple(fc.constant(cfg), arbRaw(arbShape(), { rewards: 'real', kinks: kinksOf(cfg) }));
        }),
        ([cfg, raw]) => {
          const [v, g] = lossAndGrad(raw, cfg);
          const ref = refOptions(cfg, raw);
          expectClose(v, refGrpoLoss(raw, raw.logp, ref), 1e-10, 'loss');
          expectAllClose(
            g,
            finiteDiff((lp) => refGrpoLoss(raw, lp, ref), raw.logp),
            1e-6,
            'grad',
          );
        },
      ),
      { numRuns: 60 },
    );
  });

  it('DAPO (clip-higher, token-mean, dynamic sampling drops groups with equal rewards)', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape({ maxGroups: 4 }), { rewards: 'binary-any', kinks: [Math.log(0.8), Math.log(1.28)] }),
        (raw) => {
          const cfg = DAPO_DEFAULTS;
          expect(cfg.epsilonHigh).toBe(0.28);
          const [v, g] = lossAndGrad(raw, cfg);
          const ref = refOptions(cfg, raw);
          expectClose(v, refGrpoLoss(raw, raw.logp, ref), 1e-10, 'loss');
          expectAllClose(
            g,
            finiteDiff((lp) => refGrpoLoss(raw, lp, ref), raw.logp),
            1e-6,
            'grad',
          );
          // rows of dropped groups get exactly zero gradient
          const keep = dynamicSamplingKeep(raw.rewards, raw.groupIds);
          keep.forEach((k, i) => {
            if (!k) for (let t = 0; t < raw.t; t++) expect(Math.abs(g[i * raw.t + t]!)).toBe(0);
          });
        },
      ),
      { numRuns: 50 },
    );
  });

  it('Dr. GRPO (A = r - mean, sum / (B * max_completion_length))', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape(), { rewards: 'real', kinks: [Math.log(0.8), Math.log(1.2)] }),
        fc.integer({ min: 6, max: 20 }),
        (raw, lmax) => {
          const cfg: GrpoConfig = { ...DR_GRPO_DEFAULTS, maxCompletionLength: lmax };
          const [v] = lossAndGrad(raw, cfg);
          // independent: mean-centred rewards, dr_grpo normaliser
          const means = new Map<number, number[]>();
          raw.groupIds.forEach((g, i) => means.set(g, [...(means.get(g) ?? []), raw.rewards[i]!]));
          let total = 0;
          for (let i = 0; i < raw.b; i++) {
            const rs = means.get(raw.groupIds[i]!)!;
            const a = rs.every((r) => r === rs[0]) ? 0 : raw.rewards[i]! - rs.reduce((s, r) => s + r, 0) / rs.length;
            for (let t = 0; t < raw.t; t++) {
              const k = i * raw.t + t;
              if (!raw.mask[k]) continue;
              const rho = Math.exp(raw.logp[k]! - raw.old[k]!);
              total += -Math.min(rho * a, Math.min(Math.max(rho, 0.8), 1.2) * a);
            }
          }
          expectClose(v, total / (raw.b * lmax), 1e-10, 'dr_grpo loss');
        },
      ),
      { numRuns: 50 },
    );
  });

  it('soft overlong punishment (DAPO) and its use in the rewards', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 10, max: 100 }),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 0, max: 150 }),
        (lmax, cache, len) => {
          const p = softOverlongPenalty(len, lmax, cache);
          if (len <= lmax - cache) expect(p).toBe(0);
          else if (len <= lmax) expectClose(p, (lmax - cache - len) / cache, 1e-15, 'penalty');
          else expect(p).toBe(-1);
          expect(p).toBeGreaterThanOrEqual(-1);
          expect(p).toBeLessThanOrEqual(0);
        },
      ),
    );
    expect(applySoftOverlong([1, 0], [5, 9], { maxLength: 10, cacheLength: 4, penaltyFactor: 1 })).toEqual([1, -0.75]);
  });

  it('overlong shaping changes the advantages the loss uses', () => {
    fc.assert(
      fc.property(
        arbRaw(arbShape({ maxT: 5 }), { rewards: 'binary-any', kinks: [Math.log(0.8), Math.log(1.28)] }).chain((raw) =>
          fc.tuple(fc.constant(raw), fc.array(fc.integer({ min: 0, max: 12 }), { minLength: raw.b, maxLength: raw.b })),
        ),
        ([raw, lengths]) => {
          const overlong = { maxLength: 10, cacheLength: 4, penaltyFactor: 1 };
          const cfg: GrpoConfig = { ...DAPO_DEFAULTS, overlong };
          const f = valueAndGrad((lp: Tensor) => grpoLoss(toBatch(raw, lp, { lengths }), cfg).loss);
          const v = f(f64(raw.logp, [raw.b, raw.t]))[0].itemSync();
          const shaped = raw.rewards.map((r, i) => r + softOverlongPenalty(lengths[i]!, 10, 4));
          const ref = { ...refOptions(cfg, raw), rewards: shaped };
          expectClose(v, refGrpoLoss(raw, raw.logp, ref), 1e-10, 'loss');
        },
      ),
      { numRuns: 30 },
    );
  });

  it('reports TRL clip fractions that match a count', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), (raw) => {
        const m = grpoLoss(toBatch(raw), GRPO_DEFAULTS).metrics;
        const adv = new Map<number, number[]>();
        raw.groupIds.forEach((g, i) => adv.set(g, [...(adv.get(g) ?? []), raw.rewards[i]!]));
        let low = 0;
        let high = 0;
        let n = 0;
        for (let i = 0; i < raw.b; i++) {
          const rs = adv.get(raw.groupIds[i]!)!;
          const mean = rs.reduce((s, r) => s + r, 0) / rs.length;
          const a = raw.rewards[i]! - mean;
          for (let t = 0; t < raw.t; t++) {
            const k = i * raw.t + t;
            if (!raw.mask[k]) continue;
            n++;
            const rho = Math.exp(raw.logp[k]! - raw.old[k]!);
            if (rho < 0.8 && a < 0) low++;
            if (rho > 1.2 && a > 0) high++;
          }
        }
        expectClose(m['clip_ratio/low_mean']!.itemSync(), low / Math.max(1, n), 1e-12, 'low');
        expectClose(m['clip_ratio/high_mean']!.itemSync(), high / Math.max(1, n), 1e-12, 'high');
        expectClose(m['clip_ratio/region_mean']!.itemSync(), (low + high) / Math.max(1, n), 1e-12, 'region');
      }),
      { numRuns: 30 },
    );
  });
});
