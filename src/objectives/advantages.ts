import * as E from 'fp-ts/lib/Either.js';
import { nonNegative, nullable, intAtLeast, oneOf, type Check, type Spec } from '../core/validate.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import type { Prepared } from './batch.js';
import { groupLayout, groupMean } from './groups.js';

/**
 * Group-relative advantages, computed on the host from the rewards (small arrays), then uploaded.
 *
 * A_i = (r_i - mean_g r) / (std + advantageEpsilon), with
 * - `scaleRewards` (TRL's `scale_rewards`): 'group' divides by the group's std, 'batch' by the std of all the
 *   batch's rewards, 'none' does not divide (Dr. GRPO's A_i = r_i - mean_g r);
 * - `stdMode`: 'population' divides the squared deviations by G (the paper, Eq. 1), 'bessel' by G - 1 (TRL's
 *   and verl's `torch.std`);
 * - `advantageEpsilon`: 0 in the paper, 1e-4 in TRL, 1e-6 in verl.
 *
 * Degenerate groups are defined, not NaN: a group whose rewards are all equal (a single rollout included) gets
 * A_i = 0 exactly, whatever the scaling (its centred rewards are set to 0 rather than computed, since a floating
 * mean of equal values may be off by an ulp). verl instead gives a single-rollout group mean 0 and std 1.
 */
export type ScaleRewards = 'group' | 'batch' | 'none';
export type StdMode = 'population' | 'bessel';

export interface AdvantageOptions {
  readonly scaleRewards: ScaleRewards;
  readonly stdMode: StdMode;
  readonly advantageEpsilon: number;
}

/** The paper's advantages (Eq. 1): group mean and population std, no epsilon. */
export const PAPER_ADVANTAGES: AdvantageOptions = { scaleRewards: 'group', stdMode: 'population', advantageEpsilon: 0 };
/** TRL's GRPOTrainer: Bessel std, +1e-4. */
export const TRL_ADVANTAGES: AdvantageOptions = { scaleRewards: 'group', stdMode: 'bessel', advantageEpsilon: 1e-4 };
/** verl's `compute_grpo_outcome_advantage`: Bessel std, +1e-6. */
export const VERL_ADVANTAGES: AdvantageOptions = { scaleRewards: 'group', stdMode: 'bessel', advantageEpsilon: 1e-6 };

/** Standard deviation with the given convention; 0 when all values are equal (or fewer than two with Bessel). */
export function stdOf(xs: readonly number[], mode: StdMode): number {
  if (xs.length === 0 || xs.every((x) => x === xs[0])) return 0;
  const mean = groupMean(xs);
  const ss = xs.reduce((s, x) => s + (x - mean) ** 2, 0);
  const n = mode === 'population' ? xs.length : xs.length - 1;
  return n > 0 ? Math.sqrt(ss / n) : 0;
}

export function groupAdvantages(
  rewards: readonly number[],
  groupIds: readonly number[],
  opts: AdvantageOptions,
): number[] {
  return baselineAdvantages(rewards, groupIds, opts, groupMean);
}

/**
 * The same with another per-group baseline b in place of the group mean: A_i = (r_i - b) / (std + epsilon), with
 * the same scaling options and the same exact zeros for all-equal groups (RCC's baseline uses it).
 * `baseline` gets the group's rewards and their row indices.
 */
export function baselineAdvantages(
  rewards: readonly number[],
  groupIds: readonly number[],
  opts: AdvantageOptions,
  baseline: (groupRewards: readonly number[], rows: readonly number[]) => number,
): number[] {
  const layout = groupLayout(groupIds);
  const out = new Array<number>(rewards.length).fill(0);
  const batchStd = opts.scaleRewards === 'batch' ? stdOf(rewards, opts.stdMode) : 0;
  for (const rows of layout.members) {
    const rs = rows.map((i) => rewards[i]!);
    if (rs.every((r) => r === rs[0])) continue; // all equal: A = 0
    const mean = baseline(rs, rows);
    const denom =
      opts.scaleRewards === 'none'
        ? 1
        : (opts.scaleRewards === 'group' ? stdOf(rs, opts.stdMode) : batchStd) + opts.advantageEpsilon;
    rows.forEach((row, k) => {
      out[row] = denom > 0 ? (rs[k]! - mean) / denom : 0;
    });
  }
  return out;
}

/** @internal The batch's advantages (precomputed if given) as a [B, 1] tensor beside the log-probs. */
export function advantageTensor(values: readonly number[], prep: Prepared): Tensor {
  return tensor([...values], [values.length, 1], { dtype: prep.dtype, backend: prep.backend });
}

/** Advantage settings shared by the advantage-based objectives. */
export interface AdvantageConfig extends AdvantageOptions {
  /**
   * TRL `num_generations` (G). null: groups are read from `groupIds` and may differ in size; a number (>= 2):
   * every group must have exactly G rows.
   */
  readonly numGenerations: number | null;
}

export const PAPER_ADVANTAGE_CONFIG: AdvantageConfig = { ...PAPER_ADVANTAGES, numGenerations: null };

/** TRL's legacy booleans map true -> 'group', false -> 'none' (verl's `norm_adv_by_std_in_grpo` too). */
const scaleRewardsCheck: Check<ScaleRewards> = (v) => {
  if (v === true) return E.right('group');
  if (v === false) return E.right('none');
  return oneOf<ScaleRewards>(['group', 'batch', 'none'])(v);
};

/** G: a group needs at least two rollouts to compare. */
export const groupSize = intAtLeast(2, ' (a group needs at least two rollouts)');

export const advantageSpec: Spec<AdvantageConfig> = {
  scaleRewards: scaleRewardsCheck,
  stdMode: oneOf<StdMode>(['population', 'bessel'], { unbiased: 'bessel', biased: 'population' }),
  advantageEpsilon: nonNegative,
  numGenerations: nullable(groupSize),
};

/** verl's `norm_adv_by_std_in_grpo: false` is scaleRewards 'none'. */
export const ADVANTAGE_ALIASES = {
  num_generations: 'numGenerations',
  G: 'numGenerations',
  norm_adv_by_std_in_grpo: 'scaleRewards',
} as const;
