import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { gather, grad, matmul, Rng, randn, tensor, tokenLogProbs, valueAndGrad, type Tensor } from '../../src/index.js';
import {
  binaryFormCoefficients,
  binaryWeight,
  discriminativeFromScores,
  discriminativeLoss,
  generalFormCoefficients,
  groupAdvantages,
  grpoLoss,
  GRPO_DEFAULTS,
  lemma3Weights,
  type DiscriminativeOptions,
  type GrpoConfig,
} from '../../src/objectives/index.js';
import {
  arbRaw,
  arbShape,
  expectAllClose,
  expectClose,
  f64,
  groupsOf,
  refAdvantages,
  toBatch,
  type Raw,
  type RefAdvOptions,
} from './helpers.js';

// Prop. 1 is an exact identity: both sides are the same sums in a different order, so in f64 they agree to
// rounding. 1e-9 relative (absolute below 1) is tight for that. The parameter gradients go through a small
// model (embedding, matmul, log-softmax) and still agree to rounding.
const TOL = 1e-9;

const arbEps = fc.record({
  epsilon: fc.double({ min: 0.05, max: 0.45, noNaN: true }),
  epsilonHigh: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
});

/** Plain-loop Eq. 7 scores of one row. */
function refScores(raw: Raw, i: number, eps: number, epsHigh: number): { plus: number; minus: number } {
  let plus = 0;
  let minus = 0;
  let l = 0;
  for (let t = 0; t < raw.t; t++) {
    const k = i * raw.t + t;
    if (!raw.mask[k]) continue;
    const rho = Math.exp(raw.logp[k]! - raw.old[k]!);
    plus += Math.min(rho, 1 + epsHigh);
    minus += Math.max(rho, 1 - eps);
    l++;
  }
  return { plus: plus / Math.max(1, l), minus: minus / Math.max(1, l) };
}

/** Eq. 6/8 by plain loops, batch-normalised like `grpo` (group q weighted G_q / B). */
function refBinaryForm(raw: Raw, eps: number, epsHigh: number): number {
  let j = 0;
  for (const g of groupsOf(raw.groupIds)) {
    const pos = g.filter((i) => raw.rewards[i] === 1);
    const neg = g.filter((i) => raw.rewards[i] === 0);
    if (pos.length === 0 || neg.length === 0) continue;
    const p = pos.length / g.length;
    const meanPlus = pos.reduce((s, i) => s + refScores(raw, i, eps, epsHigh).plus, 0) / pos.length;
    const meanMinus = neg.reduce((s, i) => s + refScores(raw, i, eps, epsHigh).minus, 0) / neg.length;
    j += (g.length / raw.b) * Math.sqrt(p * (1 - p)) * (meanPlus - meanMinus);
  }
  return j;
}

/** Eq. 5 by plain loops: W (E~+ s+ - E~- s-), W = (1/2) mean |A|, reweighted by A^+ and A^-. */
function refGeneralForm(raw: Raw, adv: number[], eps: number, epsHigh: number): number {
  let j = 0;
  for (const g of groupsOf(raw.groupIds)) {
    const w = g.reduce((s, i) => s + Math.abs(adv[i]!), 0) / (2 * g.length);
    const zPlus = g.reduce((s, i) => s + Math.max(adv[i]!, 0), 0);
    const zMinus = g.reduce((s, i) => s + Math.max(-adv[i]!, 0), 0);
    if (w === 0) continue;
    let ePlus = 0;
    let eMinus = 0;
    for (const i of g) {
      const s = refScores(raw, i, eps, epsHigh);
      ePlus += (Math.max(adv[i]!, 0) / zPlus) * s.plus;
      eMinus += (Math.max(-adv[i]!, 0) / zMinus) * s.minus;
    }
    j += (g.length / raw.b) * w * (ePlus - eMinus);
  }
  return j;
}

const grpoCfg = (e: { epsilon: number; epsilonHigh: number }, adv: Partial<GrpoConfig> = {}): GrpoConfig => ({
  ...GRPO_DEFAULTS,
  ...e,
  lossType: 'grpo',
  beta: 0,
  ...adv,
});
const discCfg = (
  e: { epsilon: number; epsilonHigh: number },
  form: 'binary' | 'general',
  adv: Partial<DiscriminativeOptions> = {},
): DiscriminativeOptions => ({
  scaleRewards: 'group',
  stdMode: 'population',
  advantageEpsilon: 0,
  ...e,
  form,
  ...adv,
});

function valueGrad(raw: Raw, loss: (lp: Tensor) => Tensor): [number, Float64Array] {
  const [v, g] = valueAndGrad(loss)(f64(raw.logp, [raw.b, raw.t]));
  return [v.itemSync(), g.dataSync() as Float64Array];
}

describe('Prop. 1: GRPO as a discriminative objective', () => {
  it('binary rewards: the clipped surrogate (seq-mean-token-mean) equals sqrt(p(1-p)) (mean s+ - mean s-), in value and gradient', () => {
    fc.assert(
      fc.property(arbEps, arbRaw(arbShape({ maxGroups: 2, minG: 2, maxG: 16 }), { rewards: 'binary' }), (eps, raw) => {
        const [vGrpo, gGrpo] = valueGrad(raw, (lp) => grpoLoss(toBatch(raw, lp), grpoCfg(eps)).loss);
        const [vDisc, gDisc] = valueGrad(
          raw,
          (lp) => discriminativeLoss(toBatch(raw, lp), discCfg(eps, 'binary')).loss,
        );
        expectClose(vGrpo, vDisc, TOL, 'value');
        expectClose(-vDisc, refBinaryForm(raw, eps.epsilon, eps.epsilonHigh), TOL, 'Eq. 8 by loops');
        expectAllClose(gGrpo, gDisc, TOL, 'grad w.r.t. log-probs');
      }),
      { numRuns: 150 },
    );
  });

  it('general rewards: equals W (E~+ s+ - E~- s-) with W = (1/2) E|A|, for the paper, TRL and verl advantages', () => {
    const advs: Partial<GrpoConfig>[] = [
      { scaleRewards: 'group', stdMode: 'population', advantageEpsilon: 0 },
      { scaleRewards: 'group', stdMode: 'bessel', advantageEpsilon: 1e-4 },
      { scaleRewards: 'batch', stdMode: 'bessel', advantageEpsilon: 1e-6 },
      { scaleRewards: 'none' },
    ];
    fc.assert(
      fc.property(
        arbEps,
        fc.constantFrom(...advs),
        arbRaw(arbShape({ maxGroups: 2, minG: 2, maxG: 16 }), { rewards: 'real' }),
        (eps, adv, raw) => {
          const [vGrpo, gGrpo] = valueGrad(raw, (lp) => grpoLoss(toBatch(raw, lp), grpoCfg(eps, adv)).loss);
          const [vDisc, gDisc] = valueGrad(
            raw,
            (lp) =>
              discriminativeLoss(toBatch(raw, lp), discCfg(eps, 'general', adv as Partial<DiscriminativeOptions>)).loss,
          );
          expectClose(vGrpo, vDisc, TOL, 'value');
          const refAdv = refAdvantages(raw.rewards, raw.groupIds, {
            scale: adv.scaleRewards ?? 'group',
            std: adv.stdMode ?? 'population',
            eps: adv.advantageEpsilon ?? 0,
          } as RefAdvOptions);
          expectClose(-vDisc, refGeneralForm(raw, refAdv, eps.epsilon, eps.epsilonHigh), TOL, 'Eq. 5 by loops');
          expectAllClose(gGrpo, gDisc, TOL, 'grad w.r.t. log-probs');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('equal gradients w.r.t. the parameters of a small model that produced the log-probs', () => {
    const V = 7;
    const D = 4;
    fc.assert(
      fc.property(
        arbEps,
        arbRaw(arbShape({ maxGroups: 2, minG: 2, maxG: 16, maxT: 5 }), { rewards: 'binary', allowEmpty: false }),
        fc.integer({ min: 1, max: 1e6 }),
        (eps, raw, seed) => {
          const rng = new Rng(seed);
          const params = { emb: randn([V, D], rng, { dtype: 'f64' }), w: randn([D, V], rng, { dtype: 'f64' }) };
          const ids = (): Tensor =>
            tensor(
              Int32Array.from({ length: raw.b * raw.t }, () => Math.floor(rng.uniform() * V)),
              [raw.b, raw.t],
              { dtype: 'i32' },
            );
          const inputs = ids();
          const targets = ids();
          const policy = (p: typeof params): Tensor => tokenLogProbs(matmul(gather(p.emb, inputs, 0), p.w), targets);
          // pi_old: the model's log-probs shifted by the random log-ratios of `raw` (ratios far outside the clip).
          const lp0 = policy(params).dataSync();
          const old = f64(
            Array.from(lp0, (l, k) => l - (raw.logp[k]! - raw.old[k]!)),
            [raw.b, raw.t],
          );
          const batchOf = (lp: Tensor) => ({ ...toBatch(raw, lp), oldLogProbs: old });
          const gA = grad((p: typeof params) => grpoLoss(batchOf(policy(p)), grpoCfg(eps)).loss)(params);
          const gB = grad((p: typeof params) => discriminativeLoss(batchOf(policy(p)), discCfg(eps, 'binary')).loss)(
            params,
          );
          expectAllClose(gA.emb.dataSync(), gB.emb.dataSync(), TOL, 'd/d emb');
          expectAllClose(gA.w.dataSync(), gB.w.dataSync(), TOL, 'd/d w');
          // not vacuous: the model does receive a gradient
          expect(Array.from(gA.w.dataSync()).some((x) => Math.abs(x) > 1e-8)).toBe(true);
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('Lemma 1 (Eq. 9): score derivatives of the binary form', () => {
  it('dJ/ds+_i = sqrt(p(1-p)) / N+, dJ/ds-_j = -sqrt(p(1-p)) / N-, zero across classes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }).chain((g) =>
          fc.tuple(
            fc
              .array(fc.constantFrom(0, 1), { minLength: g, maxLength: g })
              .filter((r) => r.includes(0) && r.includes(1)),
            fc.array(fc.double({ min: 0, max: 3, noNaN: true }), { minLength: 2 * g, maxLength: 2 * g }),
          ),
        ),
        ([rewards, s]) => {
          const g = rewards.length;
          const coef = binaryFormCoefficients(rewards, new Array<number>(g).fill(0));
          const scores = { plus: f64(s.slice(0, g), [g]), minus: f64(s.slice(g), [g]) };
          const [v, d] = valueAndGrad((x: typeof scores) => discriminativeFromScores(x.plus, x.minus, coef))(scores);
          const nPos = rewards.filter((r) => r === 1).length;
          const nNeg = g - nPos;
          const w = Math.sqrt((nPos / g) * (1 - nPos / g));
          const dPlus = d.plus.dataSync();
          const dMinus = d.minus.dataSync();
          let meanPlus = 0;
          let meanMinus = 0;
          rewards.forEach((r, i) => {
            expectClose(dPlus[i]!, r === 1 ? w / nPos : 0, 1e-12, `ds+[${i}]`);
            expectClose(dMinus[i]!, r === 0 ? -w / nNeg : 0, 1e-12, `ds-[${i}]`);
            if (r === 1) meanPlus += s[i]! / nPos;
            else meanMinus += s[g + i]! / nNeg;
          });
          expectClose(v.itemSync(), w * (meanPlus - meanMinus), 1e-12, 'Eq. 8');
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('Lemmas 3 and 4: the weights', () => {
  it('Lemma 3: W+ = W- = (1/2) E|A| > 0 whenever sigma > 0, for every advantage convention', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }).chain((g) =>
          fc.array(
            fc.integer({ min: -20, max: 20 }).map((k) => k / 4),
            { minLength: g, maxLength: g },
          ),
        ),
        fc.constantFrom<RefAdvOptions>(
          { scale: 'group', std: 'population', eps: 0 },
          { scale: 'group', std: 'bessel', eps: 1e-4 },
          { scale: 'none', std: 'population', eps: 0 },
        ),
        (rewards, adv) => {
          fc.pre(!rewards.every((r) => r === rewards[0]));
          const a = refAdvantages(rewards, new Array<number>(rewards.length).fill(1), adv);
          const w = lemma3Weights(a);
          expectClose(w.wPlus, w.wMinus, 1e-12, 'W+ = W-');
          expectClose(w.w, w.wPlus, 1e-12, 'W = W+');
          const halfMeanAbs = a.reduce((s, x) => s + Math.abs(x), 0) / (2 * a.length);
          expectClose(w.w, halfMeanAbs, 1e-12, 'W = E|A|/2');
          expect(w.w).toBeGreaterThan(0);
          // the reweighted distributions A^+/(G W) and A^-/(G W) sum to 1
          expectClose(a.reduce((s, x) => s + Math.max(x, 0), 0) / (a.length * w.w), 1, 1e-12, 'pi~+ mass');
          expectClose(a.reduce((s, x) => s + Math.max(-x, 0), 0) / (a.length * w.w), 1, 1e-12, 'pi~- mass');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('Lemma 4: under binary rewards W = sqrt(p(1-p)) and the reweighted distributions are the class conditionals', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 16 }).chain((g) => fc.array(fc.constantFrom(0, 1), { minLength: g, maxLength: g })),
        (rewards) => {
          fc.pre(rewards.includes(0) && rewards.includes(1));
          const ids = new Array<number>(rewards.length).fill(5);
          const a = groupAdvantages(rewards, ids, {
            scaleRewards: 'group',
            stdMode: 'population',
            advantageEpsilon: 0,
          });
          const nPos = rewards.filter((r) => r === 1).length;
          const p = nPos / rewards.length;
          expectClose(lemma3Weights(a).w, Math.sqrt(p * (1 - p)), 1e-12, 'W');
          expectClose(binaryWeight(nPos, rewards.length), Math.sqrt(p * (1 - p)), 1e-15, 'binaryWeight');
          // general-form coefficients (reweighted by A+/A-) equal the binary ones (uniform over each class)
          const gen = generalFormCoefficients(a, ids);
          const bin = binaryFormCoefficients(rewards, ids);
          expectAllClose(gen.plus, bin.plus, 1e-12, 'plus');
          expectAllClose(gen.minus, bin.minus, 1e-12, 'minus');
        },
      ),
      { numRuns: 100 },
    );
  });
});
