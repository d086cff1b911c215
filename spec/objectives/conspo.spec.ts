import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { valueAndGrad, type Tensor } from '../../src/index.js';
import {
  contrastGroups,
  contrastiveObjective,
  conspoLoss,
  conspoMargin,
  CONSPO_DEFAULTS,
  scheduledMargin,
  type ConspoConfig,
} from '../../src/objectives/index.js';
import {
  arbRaw,
  arbShape,
  expectAllClose,
  expectClose,
  f64,
  finiteDiff,
  groupsOf,
  toBatch,
  type Raw,
} from './helpers.js';

// Tolerances: closed forms vs autodiff in f64, 1e-12 (a few roundings of O(1) quantities). Finite differences
// of the plain-loop reference: 1e-6 (see grpo.spec.ts). The Eq. 14 ratio is compared relatively at 1e-9:
// it divides two derivatives that may be as small as 1e-6.

describe('Lemma 2 (Eqs. 12-14): InfoNCE score derivatives, with and without the margin of Eq. 15', () => {
  const arbGroup = fc.integer({ min: 2, max: 16 }).chain((g) =>
    fc.record({
      rewards: fc
        .array(fc.constantFrom(0, 1), { minLength: g, maxLength: g })
        .filter((r) => r.includes(0) && r.includes(1)),
      s: fc.array(fc.double({ min: -4, max: 0, noNaN: true }), { minLength: g, maxLength: g }),
      tau: fc.double({ min: 0.2, max: 20, noNaN: true }),
      margin: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 0.5, noNaN: true })),
    }),
  );

  it('closed forms, the balance of Eq. 13 and the ratio of Eq. 14', () => {
    fc.assert(
      fc.property(arbGroup, ({ rewards, s, tau, margin }) => {
        const g = rewards.length;
        const groups = contrastGroups(rewards, new Array<number>(g).fill(0));
        const [j, d] = valueAndGrad(
          (x: Tensor) =>
            contrastiveObjective(x, x, groups, { tau, margin, contrast: 'infonce', groupNormalizer: 'all' }).objective,
        )(f64(s, [g]));
        const grads = d.dataSync();
        const pos = rewards.flatMap((r, i) => (r === 1 ? [i] : []));
        const neg = rewards.flatMap((r, i) => (r === 0 ? [i] : []));
        const nPos = pos.length;
        // Eq. 11 by loops
        const Z = (i: number): number =>
          Math.exp((s[i]! - margin) / tau) + neg.reduce((acc, k) => acc + Math.exp(s[k]! / tau), 0);
        const pPlus = (i: number): number => Math.exp((s[i]! - margin) / tau) / Z(i);
        const pMinus = (i: number, j: number): number => Math.exp(s[j]! / tau) / Z(i);
        // Eq. 15 value
        expectClose(j.itemSync(), pos.reduce((acc, i) => acc + tau * Math.log(pPlus(i)), 0) / nPos, 1e-12, 'J');
        // Eq. 12
        for (const i of pos) expectClose(grads[i]!, (1 - pPlus(i)) / nPos, 1e-12, `dJ/ds+_${i}`);
        for (const jj of neg)
          expectClose(grads[jj]!, -pos.reduce((acc, i) => acc + pMinus(i, jj), 0) / nPos, 1e-12, `dJ/ds-_${jj}`);
        // Eq. 13
        const negSum = neg.reduce((acc, k) => acc + grads[k]!, 0);
        expectClose(negSum, -pos.reduce((acc, i) => acc + (1 - pPlus(i)), 0) / nPos, 1e-12, 'sum over negatives');
        expectClose(
          Array.from(grads).reduce((a, b) => a + b, 0),
          0,
          1e-12,
          'sum over the group',
        );
        // Eq. 14
        for (const a of neg)
          for (const b of neg) {
            const ratio = Math.abs(grads[a]!) / Math.abs(grads[b]!);
            expectClose(ratio / Math.exp((s[a]! - s[b]!) / tau), 1, 1e-9, `ratio ${a}/${b}`);
          }
      }),
      { numRuns: 200 },
    );
  });

  it('the P_i^+ reported are Eq. 11, and the margin lowers them', () => {
    fc.assert(
      fc.property(arbGroup, ({ rewards, s, tau }) => {
        const g = rewards.length;
        const groups = contrastGroups(rewards, new Array<number>(g).fill(0));
        const opts = { tau, contrast: 'infonce', groupNormalizer: 'all' } as const;
        const p0 = contrastiveObjective(f64(s, [g]), f64(s, [g]), groups, {
          ...opts,
          margin: 0,
        }).positiveProb.dataSync();
        const p1 = contrastiveObjective(f64(s, [g]), f64(s, [g]), groups, {
          ...opts,
          margin: 0.3,
        }).positiveProb.dataSync();
        rewards.forEach((r, i) => {
          if (r === 0) return expect(p0[i]).toBe(0);
          const z =
            Math.exp(s[i]! / tau) +
            rewards.reduce<number>((acc, rk, k) => acc + (rk === 0 ? Math.exp(s[k]! / tau) : 0), 0);
          expectClose(p0[i]!, Math.exp(s[i]! / tau) / z, 1e-12, 'P+');
          expect(p1[i]!).toBeLessThan(p0[i]!);
        });
      }),
      { numRuns: 50 },
    );
  });
});

describe('Eq. 16: the margin schedule', () => {
  it('0 at the start, M from lambda = alpha on, nondecreasing, cosine in between', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 1e-3, max: 1, noNaN: true }),
        fc.oneof(fc.constant(0), fc.double({ min: 1e-8, max: 1, noNaN: true })),
        (l1, l2, alpha, M) => {
          expect(scheduledMargin(0, M, alpha)).toBe(0);
          const [lo, hi] = l1 <= l2 ? [l1, l2] : [l2, l1];
          expect(scheduledMargin(hi, M, alpha)).toBeGreaterThanOrEqual(scheduledMargin(lo, M, alpha));
          for (const l of [l1, l2]) {
            const m = scheduledMargin(l, M, alpha);
            if (l >= alpha) expectClose(m, M, 1e-15, 'plateau');
            else expectClose(m, (M / 2) * (1 - Math.cos((Math.PI * l) / alpha)), 1e-15, 'cosine');
            expect(m).toBeGreaterThanOrEqual(0);
            expect(m).toBeLessThanOrEqual(M);
          }
          // half-way through the warmup the margin is M/2
          expectClose(scheduledMargin(alpha / 2, M, alpha), M / 2, 1e-12, 'midpoint');
        },
      ),
      { numRuns: 200 },
    );
  });

  it('conspoMargin follows the configured schedule and the training progress', () => {
    const cfg = CONSPO_DEFAULTS;
    expect(conspoMargin(cfg, { step: 0, totalSteps: 1000 })).toBe(0);
    expectClose(conspoMargin(cfg, { step: 150, totalSteps: 1000 }), 0.005, 1e-15, 'mid warmup');
    expect(conspoMargin(cfg, { step: 300, totalSteps: 1000 })).toBe(0.01);
    expect(conspoMargin(cfg, { step: 2000, totalSteps: 1000 })).toBe(0.01);
    expect(conspoMargin({ ...cfg, marginSchedule: 'fixed' })).toBe(0.01);
    expect(conspoMargin({ ...cfg, marginSchedule: 'none' }, { step: 900, totalSteps: 1000 })).toBe(0);
    expect(() => conspoMargin(cfg)).toThrow(/step/);
  });
});

// ---------------------------------------------------------------------------------------------------------------
// ConSPO's loss against a plain-loop statement of Eq. 15 (and the ablations of Table 6).

interface RefConspo {
  tau: number;
  margin: number;
  normalizer: 'all' | 'valid';
  contrast: 'infonce' | 'linear';
  score: 'log-likelihood' | 'clipped-ratio';
  eps: number;
  epsHigh: number;
}

function refConspoLoss(raw: Raw, logp: readonly number[], o: RefConspo): number {
  const L: number[] = [];
  const sLL: number[] = [];
  const sPlus: number[] = [];
  const sMinus: number[] = [];
  for (let i = 0; i < raw.b; i++) {
    let l = 0;
    let a = 0;
    let p = 0;
    let q = 0;
    for (let t = 0; t < raw.t; t++) {
      const k = i * raw.t + t;
      if (!raw.mask[k]) continue;
      l++;
      a += logp[k]!;
      const rho = Math.exp(logp[k]! - raw.old[k]!);
      p += Math.min(rho, 1 + o.epsHigh);
      q += Math.max(rho, 1 - o.eps);
    }
    L.push(l);
    sLL.push(a / Math.max(1, l));
    sPlus.push(p / Math.max(1, l));
    sMinus.push(q / Math.max(1, l));
  }
  const sp = o.score === 'log-likelihood' ? sLL : sPlus;
  const sn = o.score === 'log-likelihood' ? sLL : sMinus;
  const groups = groupsOf(raw.groupIds);
  let total = 0;
  let valid = 0;
  for (const g of groups) {
    const pos = g.filter((i) => L[i]! > 0 && raw.rewards[i]! > 0.5);
    const neg = g.filter((i) => L[i]! > 0 && raw.rewards[i]! <= 0.5);
    if (pos.length === 0 || neg.length === 0) continue; // skipped
    valid++;
    if (o.contrast === 'linear') {
      const p = pos.length / (pos.length + neg.length);
      const mp = pos.reduce((acc, i) => acc + sp[i]! - o.margin, 0) / pos.length;
      const mn = neg.reduce((acc, j) => acc + sn[j]!, 0) / neg.length;
      total += Math.sqrt(p * (1 - p)) * (mp - mn);
      continue;
    }
    let jq = 0;
    for (const i of pos) {
      const num = Math.exp((sp[i]! - o.margin) / o.tau);
      const den = num + neg.reduce((acc, j) => acc + Math.exp(sn[j]! / o.tau), 0);
      jq += o.tau * Math.log(num / den);
    }
    total += jq / pos.length;
  }
  return -total / (o.normalizer === 'all' ? groups.length : Math.max(1, valid));
}

const arbConspo = fc
  .record({
    tau: fc.double({ min: 0.5, max: 20, noNaN: true }),
    margin: fc.double({ min: 0, max: 0.2, noNaN: true }),
    alpha: fc.double({ min: 0.05, max: 1, noNaN: true }),
    marginSchedule: fc.constantFrom('cosine', 'fixed', 'none'),
    contrast: fc.constantFrom('infonce', 'linear'),
    score: fc.constantFrom('log-likelihood', 'clipped-ratio'),
    groupNormalizer: fc.constantFrom('all', 'valid'),
    epsilon: fc.double({ min: 0.05, max: 0.45, noNaN: true }),
    epsilonHigh: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
  })
  .map((c) => ({ ...CONSPO_DEFAULTS, ...c }) as ConspoConfig);

describe('ConSPO loss (Eq. 15) and the Table 6 ablations against plain loops', () => {
  it('value and gradient w.r.t. the log-probs, over several groups (some skipped, some rows empty)', () => {
    fc.assert(
      fc.property(
        arbConspo.chain((cfg) =>
          fc.tuple(
            fc.constant(cfg),
            arbRaw(arbShape({ maxGroups: 4, maxG: 8 }), {
              rewards: 'binary-any',
              kinks: [Math.log(1 - cfg.epsilon), Math.log(1 + cfg.epsilonHigh)],
            }),
            fc.integer({ min: 0, max: 1000 }),
          ),
        ),
        ([cfg, raw, step]) => {
          const progress = { step, totalSteps: 1000 };
          // Eq. 16, stated independently of the implementation
          const lambda = step / 1000;
          const m =
            cfg.marginSchedule === 'none'
              ? 0
              : cfg.marginSchedule === 'fixed'
                ? cfg.margin
                : (cfg.margin / 2) * (1 - Math.cos(Math.PI * Math.min(lambda / cfg.alpha, 1)));
          const [v, g] = valueAndGrad((lp: Tensor) => conspoLoss(toBatch(raw, lp), cfg, progress).loss)(
            f64(raw.logp, [raw.b, raw.t]),
          );
          const o: RefConspo = {
            tau: cfg.tau,
            margin: m,
            normalizer: cfg.groupNormalizer,
            contrast: cfg.contrast,
            score: cfg.score,
            eps: cfg.epsilon,
            epsHigh: cfg.epsilonHigh,
          };
          expectClose(conspoMargin(cfg, progress), m, 1e-15, 'margin');
          expectClose(v.itemSync(), refConspoLoss(raw, raw.logp, o), 1e-10, 'loss');
          expectAllClose(
            g.dataSync(),
            finiteDiff((lp) => refConspoLoss(raw, lp, o), raw.logp),
            1e-6,
            'grad',
          );
        },
      ),
      { numRuns: 100 },
    );
  });

  it('the default config is the paper: tau 10, M 0.01, alpha 0.3, InfoNCE over log-likelihood scores, cosine margin', () => {
    expect(CONSPO_DEFAULTS).toMatchObject({
      tau: 10,
      margin: 0.01,
      alpha: 0.3,
      contrast: 'infonce',
      score: 'log-likelihood',
      marginSchedule: 'cosine',
    });
  });

  it('metrics: the mean contrastive probability, margin and valid-group fraction', () => {
    fc.assert(
      fc.property(arbRaw(arbShape({ maxGroups: 3 }), { rewards: 'binary-any', allowEmpty: false }), (raw) => {
        const { metrics } = conspoLoss(toBatch(raw), CONSPO_DEFAULTS, { step: 100, totalSteps: 1000 });
        expectClose(metrics.margin!.itemSync(), scheduledMargin(0.1, 0.01, 0.3), 1e-15, 'margin');
        const groups = groupsOf(raw.groupIds);
        const valid = groups.filter(
          (g) => g.some((i) => raw.rewards[i] === 1) && g.some((i) => raw.rewards[i] === 0),
        ).length;
        expectClose(metrics['groups/valid_frac']!.itemSync(), valid / groups.length, 1e-15, 'valid frac');
        const p = metrics['contrastive/pos_prob_mean']!.itemSync();
        expect(p).toBeGreaterThanOrEqual(0);
        expect(p).toBeLessThanOrEqual(1);
      }),
      { numRuns: 30 },
    );
  });
});
