import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { valueAndGrad, type Tensor } from '../../src/index.js';
import { discoLoss, DISCO_DEFAULTS, type DiscoConfig } from '../../src/objectives/index.js';
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

// Values 1e-10, gradients vs central differences of the plain-loop reference 1e-6 (see grpo.spec.ts).

function refDisco(raw: Raw, lp: readonly number[], c: DiscoConfig): number {
  const L: number[] = [];
  const s: number[] = [];
  let klSum = 0;
  let n = 0;
  for (let i = 0; i < raw.b; i++) {
    let l = 0;
    let acc = 0;
    for (let t = 0; t < raw.t; t++) {
      const k = i * raw.t + t;
      if (!raw.mask[k]) continue;
      l++;
      const d = lp[k]! - raw.old[k]!;
      acc += c.score === 'log-l' ? lp[k]! : Math.exp(d);
      klSum += c.klEstimator === 'k1' ? -d : -d + Math.exp(d) - 1;
      n++;
    }
    L.push(l);
    s.push(acc / Math.max(1, l));
  }
  const groups = groupsOf(raw.groupIds);
  let j = 0;
  let valid = 0;
  for (const g of groups) {
    const pos = g.filter((i) => L[i]! > 0 && raw.rewards[i]! > c.positiveThreshold);
    const neg = g.filter((i) => L[i]! > 0 && raw.rewards[i]! <= c.positiveThreshold);
    if (pos.length === 0 || neg.length === 0) continue;
    valid++;
    const mp = pos.reduce((a, i) => a + s[i]!, 0) / pos.length;
    let negTerm: number;
    if (c.variant === 'disco-b') negTerm = neg.reduce((a, i) => a + s[i]!, 0) / neg.length;
    else {
      const sumExp = neg.reduce((a, i) => a + Math.exp(s[i]! / c.tau), 0);
      negTerm = c.tau * Math.log(c.negativeAggregate === 'logsumexp' ? sumExp : sumExp / neg.length);
    }
    j += mp - negTerm;
  }
  j /= c.groupNormalizer === 'all' ? groups.length : Math.max(1, valid);
  const kl = klSum / Math.max(1, n);
  return -j + (c.beta / 2) * Math.max(0, kl - c.delta) ** 2;
}

const arbDisco = fc
  .record({
    score: fc.constantFrom('log-l', 'l-ratio'),
    variant: fc.constantFrom('disco', 'disco-b'),
    tau: fc.double({ min: 0.5, max: 20, noNaN: true }),
    beta: fc.constantFrom(0, 1e3, 3),
    delta: fc.constantFrom(1e-4, 0.05),
    klEstimator: fc.constantFrom('k1', 'k3'),
    negativeAggregate: fc.constantFrom('logsumexp', 'logmeanexp'),
    groupNormalizer: fc.constantFrom('all', 'valid'),
  })
  .map((c) => ({ ...DISCO_DEFAULTS, ...c }) as DiscoConfig);

describe('DisCO against a plain-loop reference', () => {
  it('log-L and L-ratio scores, DisCO and DisCO-b, squared-hinge KL constraint: value and gradient', () => {
    fc.assert(
      fc.property(arbDisco, arbRaw(arbShape({ maxGroups: 4 }), { rewards: 'binary-any' }), (c, raw) => {
        const [v, g] = valueAndGrad((lp: Tensor) => discoLoss(toBatch(raw, lp), c).loss)(f64(raw.logp, [raw.b, raw.t]));
        expectClose(v.itemSync(), refDisco(raw, raw.logp, c), 1e-10, 'loss');
        expectAllClose(
          g.dataSync(),
          finiteDiff((lp) => refDisco(raw, lp, c), raw.logp),
          1e-6,
          'grad',
        );
      }),
      { numRuns: 60 },
    );
  });

  it('defaults: log-L scores, tau 10, beta 1e3, delta 1e-4', () => {
    expect(DISCO_DEFAULTS).toMatchObject({ score: 'log-l', variant: 'disco', tau: 10, beta: 1e3, delta: 1e-4 });
  });

  it('the constraint is inactive (zero penalty) while KL <= delta, and reported', () => {
    fc.assert(
      fc.property(arbRaw(arbShape(), { rewards: 'binary' }), (raw) => {
        const onPolicy = { ...raw, old: raw.logp };
        const { metrics } = discoLoss(toBatch(onPolicy), DISCO_DEFAULTS);
        expect(metrics['disco/kl']!.itemSync()).toBe(0);
        expect(metrics['disco/penalty']!.itemSync()).toBe(0);
        expect(metrics['disco/constraint_active']!.itemSync()).toBe(0);
      }),
      { numRuns: 20 },
    );
  });
});
