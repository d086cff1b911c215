import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { clamp, div, exp, maximum, mul, sub } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import { groupAdvantages, type AdvantageOptions } from './advantages.js';
import { boundedLogRatio, prepare, type Prepared, type RolloutBatch } from './batch.js';
import { baseMetrics, detachAll, hostScalar } from './common.js';
import { BatchError } from './errors.js';
import { groupLayout } from './groups.js';
import type { ObjectiveResult } from './types.js';

/**
 * The discriminative view of GRPO (Section 4.1, Prop. 1, Lemmas 1, 3, 4).
 *
 * With the clipped-ratio scores of Eq. 7,
 *   s+(o) = (1/|o|) sum_t min(rho_t, 1 + eps_high),   s-(o) = (1/|o|) sum_t max(rho_t, 1 - eps_low),
 * the GRPO surrogate of one group is (1/G) sum_i (A_i^+ s+_i - A_i^- s-_i) exactly, for every rho, because
 * f(rho, A) = A^+ min(rho, 1 + eps) - A^- max(rho, 1 - eps). With W = (1/2) mean|A| = mean A^+ = mean A^-
 * (Lemma 3, since the advantages are centred) this is W (E~+ s+ - E~- s-) with the reweighted empirical
 * distributions A^+ / (G W) and A^- / (G W) (Eq. 5, general form); under binary rewards and the paper's
 * advantages (population std, no epsilon) W = sqrt(p(1-p)) and the reweighted distributions are uniform over
 * the positives and the negatives (Lemma 4), which gives Eq. 6/8.
 *
 * Batch normalisation matches the `grpo` aggregation: the batch value is (1/B) sum over rows, i.e. group q
 * enters with weight G_q / B.
 */

/** @internal Eq. 7 on a prepared batch: [B] each; zero-length rows score 0 (max(1, L) denominators). */
export function clippedScoresOf(
  prep: Prepared,
  epsilonLow: number,
  epsilonHigh: number,
): { plus: Tensor; minus: Tensor } {
  const ratio = exp(boundedLogRatio(prep.logp, prep.old));
  // clamp passes the gradient at its bound, as GRPO's clip does; the two forms then agree even at rho = 1 +- eps.
  const len = maximum(prep.lengths, 1);
  const plus = div(sum(mul(clamp(ratio, null, 1 + epsilonHigh), prep.mask), 1), len);
  const minus = div(sum(mul(clamp(ratio, 1 - epsilonLow, null), prep.mask), 1), len);
  return { plus, minus };
}

/** Eq. 7's scores s+ and s- of each row of a batch, [B] each. */
export function clippedScores(
  batch: RolloutBatch,
  epsilonLow: number,
  epsilonHigh = epsilonLow,
): { plus: Tensor; minus: Tensor } {
  return tidy(() => clippedScoresOf(prepare(batch), epsilonLow, epsilonHigh));
}

/** Lemma 3's weights of one group's advantages: W+ = mean A^+, W- = mean A^-, W = (1/2) mean |A|. */
export interface GroupWeights {
  readonly wPlus: number;
  readonly wMinus: number;
  readonly w: number;
}

export function lemma3Weights(advantages: readonly number[]): GroupWeights {
  const g = Math.max(1, advantages.length);
  return {
    wPlus: advantages.reduce((s, a) => s + Math.max(a, 0), 0) / g,
    wMinus: advantages.reduce((s, a) => s + Math.max(-a, 0), 0) / g,
    w: advantages.reduce((s, a) => s + Math.abs(a), 0) / (2 * g),
  };
}

/** Lemma 4: W = sqrt(p (1 - p)) for binary rewards with pass rate p = N+ / G. */
export const binaryWeight = (positives: number, groupSize: number): number => {
  const p = positives / groupSize;
  return Math.sqrt(p * (1 - p));
};

/** Per-row coefficients: J = sum_i plus_i s+_i - sum_i minus_i s-_i. */
export interface DiscriminativeCoefficients {
  readonly plus: readonly number[];
  readonly minus: readonly number[];
  /** W of each group (in order of first appearance). */
  readonly groupW: readonly number[];
}

function isBinary(rewards: readonly number[]): void {
  rewards.forEach((r, i) => {
    if (r !== 0 && r !== 1)
      throw new BatchError('value', 'rewards', `is ${r}; the binary form (Eq. 6) needs rewards in {0, 1}`, i);
  });
}

/**
 * The binary form, Eq. 6/8 applied group by group: sqrt(p(1-p)) / N+ on each positive, sqrt(p(1-p)) / N- on each
 * negative, times G_q / B. Groups with N+ = 0 or N- = 0 get 0.
 */
export function binaryFormCoefficients(
  rewards: readonly number[],
  groupIds: readonly number[],
): DiscriminativeCoefficients {
  isBinary(rewards);
  const layout = groupLayout(groupIds);
  const b = rewards.length;
  const plus = new Array<number>(b).fill(0);
  const minus = new Array<number>(b).fill(0);
  const groupW = layout.members.map((rows) => {
    const nPos = rows.filter((i) => rewards[i] === 1).length;
    const nNeg = rows.length - nPos;
    if (nPos === 0 || nNeg === 0) return 0;
    const w = binaryWeight(nPos, rows.length); // Lemma 4
    const scale = rows.length / b;
    for (const i of rows) {
      if (rewards[i] === 1) plus[i] = (scale * w) / nPos;
      else minus[i] = (scale * w) / nNeg;
    }
    return w;
  });
  return { plus, minus, groupW };
}

/**
 * The general form, Eq. 5 applied group by group: W (E~+ s+ - E~- s-) with W = (1/2) mean|A| and the reweighted
 * empirical distributions A_i^+ / sum A^+ and A_i^- / sum A^-, times G_q / B. Any advantages (centred per group).
 */
export function generalFormCoefficients(
  advantages: readonly number[],
  groupIds: readonly number[],
): DiscriminativeCoefficients {
  const layout = groupLayout(groupIds);
  const b = advantages.length;
  const plus = new Array<number>(b).fill(0);
  const minus = new Array<number>(b).fill(0);
  const groupW = layout.members.map((rows) => {
    const as = rows.map((i) => advantages[i]!);
    const { w } = lemma3Weights(as); // Lemma 3
    const sumPlus = as.reduce((s, a) => s + Math.max(a, 0), 0);
    const sumMinus = as.reduce((s, a) => s + Math.max(-a, 0), 0);
    if (!(w > 0) || !(sumPlus > 0) || !(sumMinus > 0)) return 0;
    const scale = rows.length / b;
    rows.forEach((i, k) => {
      plus[i] = (scale * w * Math.max(as[k]!, 0)) / sumPlus;
      minus[i] = (scale * w * Math.max(-as[k]!, 0)) / sumMinus;
    });
    return w;
  });
  return { plus, minus, groupW };
}

/** J = sum_i plus_i s+_i - sum_i minus_i s-_i, differentiable in the scores (Lemma 1 differentiates this). */
export function discriminativeFromScores(sPlus: Tensor, sMinus: Tensor, coef: DiscriminativeCoefficients): Tensor {
  return tidy(() => {
    const opts = { dtype: sPlus.dtype, backend: sPlus.backend };
    const cp = tensor([...coef.plus], [coef.plus.length], opts);
    const cm = tensor([...coef.minus], [coef.minus.length], opts);
    return sub(sum(mul(cp, sPlus)), sum(mul(cm, sMinus)));
  });
}

export interface DiscriminativeOptions extends AdvantageOptions {
  readonly epsilon: number;
  readonly epsilonHigh: number;
  /** 'binary' (Eq. 6/8, needs rewards in {0, 1}) or 'general' (Eq. 5, from the advantages). */
  readonly form: 'binary' | 'general';
}

/**
 * GRPO's clipped surrogate written as the discriminative objective, as a loss (-J). Equal, in value and
 * gradient, to `grpoLoss` with `lossType: 'grpo'`, beta 0 and the same epsilons: for the binary form when the
 * advantages are the paper's (population std, advantageEpsilon 0), for the general form with any advantages.
 */
export function discriminativeLoss(batch: RolloutBatch, opts: DiscriminativeOptions): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const coef =
      opts.form === 'binary'
        ? binaryFormCoefficients(batch.rewards, batch.groupIds)
        : generalFormCoefficients(
            batch.advantages ?? groupAdvantages(batch.rewards, batch.groupIds, opts),
            batch.groupIds,
          );
    const s = clippedScoresOf(prep, opts.epsilon, opts.epsilonHigh);
    const j = discriminativeFromScores(s.plus, s.minus, coef);
    const q = Math.max(1, coef.groupW.length);
    return {
      loss: sub(0, j),
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds),
        'W/mean': hostScalar(coef.groupW.reduce((acc, w) => acc + w, 0) / q, prep),
      }),
    };
  });
}
