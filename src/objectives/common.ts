import type * as E from 'fp-ts/lib/Either.js';
import { parseWith, type Aliases, type Post, type Spec } from '../core/validate.js';
import type { Tensor } from '../core/tensor.js';
import { stopGradient } from '../core/transforms.js';
import { scalar } from '../ops/creation.js';
import { add, exp, mul, sub } from '../ops/elementwise.js';
import { mean } from '../ops/reduce.js';
import { groupAdvantages, type AdvantageConfig } from './advantages.js';
import { boundedLogRatio, type Prepared, type RolloutBatch } from './batch.js';
import { BatchError, ConfigError } from './errors.js';
import { aggregate, maskedMean, type LossType } from './aggregate.js';
import { groupLayout, groupStats, type GroupLayout } from './groups.js';

/** @internal Helpers shared by the objectives. */

/** Every group must have exactly G rows when the config fixes G (TRL `num_generations`). */
export function checkGroupSizes(layout: GroupLayout, numGenerations: number | null): void {
  if (numGenerations === null) return;
  layout.members.forEach((rows, g) => {
    if (rows.length !== numGenerations) {
      throw new BatchError(
        'shape',
        'groupIds',
        `group ${layout.keys[g]} has ${rows.length} rows, numGenerations is ${numGenerations}`,
        rows[0],
      );
    }
  });
}

/** The batch's advantages: precomputed ones if given, else group-normalised from `rewards` (host-side). */
export function hostAdvantages(
  batch: RolloutBatch,
  cfg: AdvantageConfig,
  rewards: readonly number[] = batch.rewards,
): number[] {
  checkGroupSizes(groupLayout(batch.groupIds), cfg.numGenerations);
  return batch.advantages ? [...batch.advantages] : groupAdvantages(rewards, batch.groupIds, cfg);
}

/** A host number as a scalar tensor beside the batch (for metrics). */
export const hostScalar = (value: number, prep: Prepared): Tensor =>
  scalar(value, { dtype: prep.dtype, backend: prep.backend });

/**
 * The k3 estimator of KL(pi_theta || pi_ref) per token: exp(d) - d - 1 with d = ref - l (TRL, DeepSeekMath),
 * d bounded to +-LOG_RATIO_BOUND (verl's low_var_kl bounds it so too).
 */
export function k3(prep: Prepared): Tensor {
  if (!prep.ref) throw new BatchError('missing', 'refLogProbs', 'is required when beta > 0');
  const d = boundedLogRatio(prep.ref, prep.logp);
  return sub(sub(exp(d), d), 1);
}

/** Reward metrics computed on the host (TRL's names): reward, reward_std, frac_reward_zero_std, pass_rate. */
function rewardMetrics(
  rewards: readonly number[],
  groupIds: readonly number[],
  prep: Prepared,
  threshold = 0.5,
): Record<string, Tensor> {
  const stats = groupStats(rewards, groupIds, threshold);
  const q = Math.max(1, stats.length);
  return {
    reward: hostScalar(rewards.reduce((s, r) => s + r, 0) / Math.max(1, rewards.length), prep),
    reward_std: hostScalar(stats.reduce((s, g) => s + g.rewardStd, 0) / q, prep),
    frac_reward_zero_std: hostScalar(stats.filter((g) => g.rewardStd === 0).length / q, prep),
    pass_rate: hostScalar(stats.reduce((s, g) => s + g.passRate, 0) / q, prep),
  };
}

/** Metrics every objective reports from the tensors: mean completion length, mean token ratio, and KL when a reference is given. */
function tokenMetrics(prep: Prepared): Record<string, Tensor> {
  const m = prep.mask;
  const logp = stopGradient(prep.logp);
  const out: Record<string, Tensor> = {
    'completions/mean_length': mean(prep.lengths),
    'ratio/mean': maskedMean(exp(boundedLogRatio(logp, prep.old)), m),
  };
  if (prep.ref) {
    const d = boundedLogRatio(prep.ref, logp);
    out.kl = maskedMean(sub(sub(exp(d), d), 1), m);
  }
  return out;
}

/** What every objective reports: the token metrics (length, ratio, KL) and the reward metrics. */
export const baseMetrics = (
  prep: Prepared,
  rewards: readonly number[],
  groupIds: readonly number[],
  threshold = 0.5,
): Record<string, Tensor> => ({ ...tokenMetrics(prep), ...rewardMetrics(rewards, groupIds, prep, threshold) });

/** Detach every metric (they must carry no gradient). */
export function detachAll(metrics: Record<string, Tensor>): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(metrics)) out[k] = stopGradient(v);
  return out;
}

/** The `dr_grpo` normaliser: config, else the batch's, else the width T. */
export const maxLengthOf = (
  cfg: { readonly maxCompletionLength: number | null },
  batch: RolloutBatch,
  prep: Prepared,
): number => cfg.maxCompletionLength ?? batch.maxCompletionLength ?? prep.t;

/** The settings `tokenLoss` reads from a token-level objective's config. */
export interface TokenLossConfig {
  readonly beta: number;
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

/**
 * The per-token loss [B, T] (or [B, 1], broadcast over the row's tokens) plus beta k3, aggregated by `lossType`
 * over `mask` with `rows` counted rows. TRL adds the KL per token, before aggregation.
 */
export function tokenLoss(
  perToken: Tensor,
  prep: Prepared,
  cfg: TokenLossConfig,
  batch: RolloutBatch,
  mask: Tensor = prep.mask,
  rows: number = prep.b,
): Tensor {
  const withKl = cfg.beta > 0 ? add(perToken, mul(k3(prep), cfg.beta)) : perToken;
  return aggregate(withKl, mask, cfg.lossType, {
    rows,
    maxCompletionLength: maxLengthOf(cfg, batch, prep),
    ...(batch.numItemsInBatch === undefined ? {} : { numItemsInBatch: batch.numItemsInBatch }),
  });
}

/**
 * Parse an objective's config record (see `core/validate.ts`): a `ConfigError` names the field as the caller spelled
 * it and says why.
 */
export function parseObjectiveConfig<C extends object>(
  objective: string,
  spec: Spec<C>,
  aliases: Aliases<C>,
  defaults: C,
  input: unknown,
  post?: Post<C>,
): E.Either<ConfigError, C> {
  const toError = (field: string, value: unknown, reason: string): ConfigError =>
    new ConfigError(objective, field, value, reason);
  // A null config means the defaults, as an absent one does.
  return parseWith(toError, spec, aliases, defaults, input ?? {}, post);
}

/** epsilonHigh follows epsilon when only epsilon is given (TRL: `epsilon_high` defaults to `epsilon`). */
export const followEpsilon = <C extends { epsilon: number; epsilonHigh: number }>(
  c: C,
  given: ReadonlySet<string>,
): C => (given.has('epsilon') && !given.has('epsilonHigh') ? { ...c, epsilonHigh: c.epsilon } : c);
