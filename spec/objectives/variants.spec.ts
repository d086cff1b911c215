import fc from 'fast-check';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { valueAndGrad, type Tensor } from '../../src/index.js';
import {
  cispoLoss,
  CISPO_DEFAULTS,
  gmpoLoss,
  GMPO_DEFAULTS,
  parseGmpoConfig,
  gspoLoss,
  GSPO_DEFAULTS,
  sapoLoss,
  SAPO_DEFAULTS,
  type CispoConfig,
  type GmpoConfig,
  type GspoConfig,
  type SapoConfig,
} from '../../src/objectives/index.js';
import {
  arbRaw,
  arbShape,
  expectAllClose,
  expectClose,
  f64,
  finiteDiff,
  k3Ref,
  PAPER_ADV,
  refAdvantages,
  refAggregate,
  type Raw,
  type RefLossType,
  toBatch,
} from './helpers.js';

// Values: 1e-10 (same sums, another order, f64). Gradients: central differences of the plain-loop reference,
// 1e-6 (see grpo.spec.ts), inputs kept 1e-4 away from kinks; CISPO's gradient is compared with its closed form
// instead (its weight is detached, so it is not the derivative of its value), at 1e-12.

const lossTypes: RefLossType[] = ['grpo', 'dapo', 'dr_grpo', 'bnpo'];

function run(raw: Raw, loss: (lp: Tensor) => Tensor): [number, Float64Array] {
  const [v, g] = valueAndGrad(loss)(f64(raw.logp, [raw.b, raw.t]));
  return [v.itemSync(), g.dataSync() as Float64Array];
}

/** Per-token terms x_{i,t} (0 at padding) from a function of (row, token index k). */
function perToken(raw: Raw, x: (i: number, k: number) => number): [number[][], number[][]] {
  const xs: number[][] = [];
  const ms: number[][] = [];
  for (let i = 0; i < raw.b; i++) {
    xs.push([]);
    ms.push([]);
    for (let t = 0; t < raw.t; t++) {
      const k = i * raw.t + t;
      ms[i]!.push(raw.mask[k]!);
      xs[i]!.push(raw.mask[k] ? x(i, k) : 0);
    }
  }
  return [xs, ms];
}

const len = (raw: Raw, i: number): number => {
  let l = 0;
  for (let t = 0; t < raw.t; t++) l += raw.mask[i * raw.t + t]!;
  return l;
};

describe('GSPO', () => {
  const ref = (raw: Raw, lp: readonly number[], c: GspoConfig): number => {
    const a = refAdvantages(raw.rewards, raw.groupIds, PAPER_ADV);
    const seq = Array.from({ length: raw.b }, (_, i) => {
      let s = 0;
      for (let t = 0; t < raw.t; t++) {
        const k = i * raw.t + t;
        if (raw.mask[k]) s += lp[k]! - raw.old[k]!;
      }
      const r = Math.exp(s / Math.max(1, len(raw, i)));
      return Math.min(r * a[i]!, Math.min(Math.max(r, 1 - c.epsilon), 1 + c.epsilonHigh) * a[i]!);
    });
    const [x, m] = perToken(raw, (i, k) => -seq[i]! + c.beta * k3Ref(lp[k]!, raw.ref[k]!));
    return refAggregate(x, m, c.lossType, { maxLen: raw.t });
  };
  it('J = (1/G) sum_i min(s_i A_i, clip(s_i) A_i) with the geometric-mean sequence ratio', () => {
    fc.assert(
      fc.property(
        fc.record({
          epsilon: fc.oneof(fc.constant(3e-4), fc.double({ min: 0.05, max: 0.5, noNaN: true })),
          epsilonHigh: fc.oneof(fc.constant(4e-4), fc.double({ min: 0.05, max: 0.5, noNaN: true })),
          beta: fc.oneof(fc.constant(0), fc.double({ min: 0.01, max: 0.3, noNaN: true })),
          lossType: fc.constantFrom(...lossTypes),
        }),
        arbRaw(arbShape(), { rewards: 'real' }),
        (c0, raw) => {
          const c: GspoConfig = { ...GSPO_DEFAULTS, ...c0 };
          const [v, g] = run(raw, (lp) => gspoLoss(toBatch(raw, lp), c).loss);
          expectClose(v, ref(raw, raw.logp, c), 1e-10, 'loss');
          expectAllClose(
            g,
            finiteDiff((lp) => ref(raw, lp, c), raw.logp),
            1e-6,
            'grad',
          );
        },
      ),
      { numRuns: 60 },
    );
  });
  it('defaults are the GSPO paper clip range 3e-4 / 4e-4', () => {
    expect(GSPO_DEFAULTS.epsilon).toBe(3e-4);
    expect(GSPO_DEFAULTS.epsilonHigh).toBe(4e-4);
  });
});

describe('GMPO', () => {
  const ref = (raw: Raw, lp: readonly number[], c: GmpoConfig): number => {
    const a = refAdvantages(raw.rewards, raw.groupIds, PAPER_ADV);
    let j = 0;
    for (let i = 0; i < raw.b; i++) {
      const l = len(raw, i);
      if (l === 0) continue;
      let s = 0;
      for (let t = 0; t < raw.t; t++) {
        const k = i * raw.t + t;
        if (!raw.mask[k]) continue;
        const d = lp[k]! - raw.old[k]!;
        const cd = Math.min(Math.max(d, -c.epsilon), c.epsilonHigh ?? c.epsilon);
        s += a[i]! > 0 ? Math.min(d, cd) : Math.max(d, cd);
      }
      j += a[i]! * Math.exp(s / l);
    }
    const [x, m] = perToken(raw, (_, k) => k3Ref(lp[k]!, raw.ref[k]!));
    return -j / raw.b + c.beta * refAggregate(x, m, 'bnpo');
  };
  it('J = mean_i A_i exp((1/L) sum_t clipped log-ratio), clipped in log space to [-eps, eps_high] on the pessimistic side', () => {
    fc.assert(
      fc.property(
        fc
          .record({
            epsilon: fc.double({ min: 0.1, max: 0.9, noNaN: true }),
            // null: the paper's symmetric range; else verl's geo_mean's asymmetric one.
            epsilonHigh: fc.option(fc.double({ min: 0.05, max: 1.5, noNaN: true }), { nil: null }),
            beta: fc.oneof(fc.constant(0), fc.double({ min: 0.01, max: 0.3, noNaN: true })),
          })
          .chain((c0) =>
            fc.tuple(
              fc.constant({ ...GMPO_DEFAULTS, ...c0 }),
              arbRaw(arbShape(), { rewards: 'real', kinks: [-c0.epsilon, c0.epsilonHigh ?? c0.epsilon] }),
            ),
          ),
        ([c, raw]) => {
          const [v, g] = run(raw, (lp) => gmpoLoss(toBatch(raw, lp), c).loss);
          expectClose(v, ref(raw, raw.logp, c), 1e-10, 'loss');
          expectAllClose(
            g,
            finiteDiff((lp) => ref(raw, lp, c), raw.logp),
            1e-6,
            'grad',
          );
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('GMPO config', () => {
  it('epsilonHigh is null (symmetric, the paper) unless given; epsilon_high is its snake_case; it must be > 0', () => {
    const parsed = (input: Record<string, unknown>): GmpoConfig | string => {
      const r = parseGmpoConfig(input);
      return E.isLeft(r) ? r.left.field : r.right;
    };
    expect(GMPO_DEFAULTS.epsilonHigh).toBeNull();
    expect(parsed({ epsilon: 0.2 })).toMatchObject({ epsilon: 0.2, epsilonHigh: null });
    expect(parsed({ epsilon_high: 0.28 })).toMatchObject({ epsilon: 0.4, epsilonHigh: 0.28 });
    expect(parsed({ epsilonHigh: 0 })).toBe('epsilonHigh');
  });
});

describe('CISPO', () => {
  it('J = (1/sum L) sum sg(min(rho, eps_max)) A l; gradient = the detached weight times A, over the token count', () => {
    fc.assert(
      fc.property(
        fc.record({
          epsilonMax: fc.double({ min: 1, max: 8, noNaN: true }),
          epsilonLow: fc.option(fc.double({ min: 0.05, max: 0.9, noNaN: true }), { nil: null }),
          beta: fc.oneof(fc.constant(0), fc.double({ min: 0.01, max: 0.3, noNaN: true })),
        }),
        arbRaw(arbShape(), { rewards: 'real' }),
        (c0, raw) => {
          const c: CispoConfig = { ...CISPO_DEFAULTS, ...c0 };
          const [v, g] = run(raw, (lp) => cispoLoss(toBatch(raw, lp), c).loss);
          const a = refAdvantages(raw.rewards, raw.groupIds, PAPER_ADV);
          const n = Math.max(
            1,
            raw.mask.reduce((s, x) => s + x, 0),
          );
          const w = (k: number): number => {
            const rho = Math.exp(raw.logp[k]! - raw.old[k]!);
            return Math.min(c.epsilonLow === null ? rho : Math.max(rho, 1 - c.epsilonLow), c.epsilonMax);
          };
          let value = 0;
          const expected: number[] = [];
          for (let i = 0; i < raw.b; i++)
            for (let t = 0; t < raw.t; t++) {
              const k = i * raw.t + t;
              if (!raw.mask[k]) {
                expected.push(0);
                continue;
              }
              value += (-w(k) * a[i]! * raw.logp[k]! + c.beta * k3Ref(raw.logp[k]!, raw.ref[k]!)) / n;
              expected.push((-w(k) * a[i]! + c.beta * (1 - Math.exp(raw.ref[k]! - raw.logp[k]!))) / n);
            }
          expectClose(v, value, 1e-10, 'loss');
          expectAllClose(g, expected, 1e-12, 'grad');
        },
      ),
      { numRuns: 60 },
    );
  });
  it('caps at an absolute 5.0 by default (TRL recommendation), not at a clip epsilon', () => {
    expect(CISPO_DEFAULTS.epsilonMax).toBe(5);
    expect(CISPO_DEFAULTS.epsilonLow).toBeNull();
  });
});

describe('SAPO', () => {
  const ref = (raw: Raw, lp: readonly number[], c: SapoConfig): number => {
    const a = refAdvantages(raw.rewards, raw.groupIds, PAPER_ADV);
    const [x, m] = perToken(raw, (i, k) => {
      const tau = a[i]! > 0 ? c.temperaturePos : c.temperatureNeg;
      const rho = Math.exp(lp[k]! - raw.old[k]!);
      const f = 4 / tau / (1 + Math.exp(-tau * (rho - 1)));
      return -f * a[i]! + c.beta * k3Ref(lp[k]!, raw.ref[k]!);
    });
    return refAggregate(x, m, c.lossType, { maxLen: raw.t });
  };
  it('J = (1/G) sum_i (1/L_i) sum_t sigmoid(tau (rho - 1)) 4/tau A_i, tau by the sign of A', () => {
    fc.assert(
      fc.property(
        fc.record({
          temperaturePos: fc.double({ min: 0.2, max: 3, noNaN: true }),
          temperatureNeg: fc.double({ min: 0.2, max: 3, noNaN: true }),
          beta: fc.oneof(fc.constant(0), fc.double({ min: 0.01, max: 0.3, noNaN: true })),
          lossType: fc.constantFrom(...lossTypes),
        }),
        arbRaw(arbShape(), { rewards: 'real' }),
        (c0, raw) => {
          const c: SapoConfig = { ...SAPO_DEFAULTS, ...c0 };
          const [v, g] = run(raw, (lp) => sapoLoss(toBatch(raw, lp), c).loss);
          expectClose(v, ref(raw, raw.logp, c), 1e-10, 'loss');
          expectAllClose(
            g,
            finiteDiff((lp) => ref(raw, lp, c), raw.logp),
            1e-6,
            'grad',
          );
        },
      ),
      { numRuns: 60 },
    );
  });
  it('on-policy (rho = 1) its gradient is the unclipped policy gradient: A / (B L_i) per token', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'real' }), (raw) => {
        const onPolicy = { ...raw, old: raw.logp };
        const [, g] = run(onPolicy, (lp) => sapoLoss(toBatch(onPolicy, lp), SAPO_DEFAULTS).loss);
        const a = refAdvantages(raw.rewards, raw.groupIds, PAPER_ADV);
        const expected = raw.mask.map((m, k) => {
          const i = Math.floor(k / raw.t);
          return m ? -a[i]! / (raw.b * Math.max(1, len(raw, i))) : 0;
        });
        expectAllClose(g, expected, 1e-12, 'grad');
      }),
      { numRuns: 30 },
    );
  });
});
