import { ArgumentError, NonFiniteError } from '../core/errors.js';
import { baselineAdvantages, type AdvantageOptions } from './advantages.js';

/**
 * RCC, Reward-Confidence Correction (the BICC paper's second mechanism; docs/ARCHITECTURE.md, "Objectives"): a
 * per-group baseline for the importance-weighted policy gradient w * grad log pi * (r - b), w = exp(delta), delta the
 * sequence log-ratio of the rollout policy against the reference. The variance-minimising constant baseline is
 * b* = E[w^2 r] / E[w^2]; to first order in delta (w^2 ~ 1 + 2 delta) it is b = mean(r) + 2 Cov(r, delta), which
 * needs no extra sampling and reduces to GRPO's mean baseline when delta is constant within the group.
 */

/** How delta is formed from per-token log-ratios: their `sum` over the completion or its length-normalised `mean`. */
export type RccDeltaMode = 'sum' | 'mean';

/** RCC's default scaling: by the group's population std, plus 1e-6 (so near-constant groups stay finite). */
export const RCC_ADVANTAGES: AdvantageOptions = {
  scaleRewards: 'group',
  stdMode: 'population',
  advantageEpsilon: 1e-6,
};

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;

function checkFinite(what: string, xs: readonly number[]): void {
  xs.forEach((x, i) => {
    if (!Number.isFinite(x)) throw new NonFiniteError(what, i, x);
  });
}

/**
 * b = mean(r) + 2 * (1/G) sum_j (r_j - mean r)(delta_j - mean delta), for one group, clamped to the group's
 * reward range [min r, max r].
 *
 * The clamp: b* is a weighted mean of the group's rewards, so it always lies in that range; its first-order
 * expansion does not once |delta| is a few nats (a policy that has moved far from the reference: one positive
 * rollout whose delta exceeds the negatives' by about 4 nats in a group of 8 gives b > 1). Outside the range every
 * advantage of the group has the same sign, and the best rollout is pushed down: without the clamp the trainer
 * drove a task's reward to 0. Inside the range (small delta, where the expansion holds) the clamp changes nothing.
 */
export function rccBaseline(rewards: readonly number[], deltas: readonly number[]): number {
  if (rewards.length !== deltas.length || rewards.length === 0) {
    throw new ArgumentError(
      'rccBaseline',
      `rewards (${rewards.length}) and deltas (${deltas.length}) must be non-empty and of equal length`,
    );
  }
  checkFinite('rccBaseline rewards', rewards);
  checkFinite('rccBaseline deltas', deltas);
  const mr = mean(rewards);
  const md = mean(deltas);
  const cov = rewards.reduce((s, r, j) => s + (r - mr) * (deltas[j]! - md), 0) / rewards.length;
  return Math.min(Math.max(mr + 2 * cov, Math.min(...rewards)), Math.max(...rewards));
}

/** The exact variance-minimising constant baseline b* = sum w^2 r / sum w^2 with w = exp(delta). */
export function optimalBaseline(rewards: readonly number[], deltas: readonly number[]): number {
  const dmax = deltas.reduce((m, d) => Math.max(m, d), Number.NEGATIVE_INFINITY);
  // Shifting delta by its max scales every w^2 alike and keeps exp from overflowing.
  const w2 = deltas.map((d) => Math.exp(2 * (d - dmax)));
  return w2.reduce((s, w, j) => s + w * rewards[j]!, 0) / w2.reduce((s, w) => s + w, 0);
}

/**
 * RCC advantages for a batch: per group, A_i = r_i - b_RCC, scaled as GRPO's advantages are (`advantages.ts`:
 * `scaleRewards`, `stdMode`, `advantageEpsilon`; default `RCC_ADVANTAGES`).
 */
export function rccAdvantages(
  rewards: readonly number[],
  deltas: readonly number[],
  groupIds: readonly number[],
  opts: AdvantageOptions = RCC_ADVANTAGES,
): number[] {
  if (rewards.length !== deltas.length || rewards.length !== groupIds.length) {
    throw new ArgumentError('rccAdvantages', 'rewards, deltas and groupIds must have one entry per rollout');
  }
  checkFinite('rccAdvantages rewards', rewards);
  checkFinite('rccAdvantages deltas', deltas);
  return baselineAdvantages(rewards, groupIds, opts, (rs, rows) =>
    rccBaseline(
      rs,
      rows.map((i) => deltas[i]!),
    ),
  );
}

/**
 * Per-rollout delta = log pi_old(o|q) - log pi_ref(o|q) from the per-token log-probs the sampler records on the host
 * ([B, C] row-major, with a 0/1 completion mask): the masked sum over tokens, or that sum over max(1, L) for
 * `mean`. A baseline takes no gradient, so host numbers suffice (tensors: `await t.data()` first).
 */
export function sequenceDeltas(
  oldLogProbs: ArrayLike<number>,
  refLogProbs: ArrayLike<number>,
  mask: ArrayLike<number>,
  completionLen: number,
  mode: RccDeltaMode = 'sum',
): number[] {
  const rows = completionLen === 0 ? 0 : mask.length / completionLen;
  return Array.from({ length: rows }, (_, r) => {
    let total = 0;
    let len = 0;
    for (let t = 0; t < completionLen; t++) {
      const i = r * completionLen + t;
      if (mask[i] === 0) continue;
      total += oldLogProbs[i]! - refLogProbs[i]!;
      len++;
    }
    return mode === 'sum' ? total : total / Math.max(1, len);
  });
}
