import type * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { add, clamp, div, exp, greater, less, minimum, mul, neg } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import { nonNegative, nullable, openUnit, positive, positiveInt } from '../core/validate.js';
import {
  advantageTensor,
  ADVANTAGE_ALIASES,
  PAPER_ADVANTAGE_CONFIG,
  advantageSpec,
  type AdvantageConfig,
} from './advantages.js';
import { maskedMean, lossTypeCheck, type LossType } from './aggregate.js';
import { boundedLogRatio, prepare, type RolloutBatch } from './batch.js';
import { baseMetrics, detachAll, hostAdvantages, tokenLoss, parseObjectiveConfig } from './common.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';

export interface GspoConfig extends AdvantageConfig {
  /** Sequence-ratio clip, in (0, 1): 3e-4 in the GSPO paper. */
  readonly epsilon: number;
  /** 4e-4 in the GSPO paper. */
  readonly epsilonHigh: number;
  readonly beta: number;
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

export const GSPO_DEFAULTS: GspoConfig = {
  ...PAPER_ADVANTAGE_CONFIG,
  epsilon: 3e-4,
  epsilonHigh: 4e-4,
  beta: 0,
  lossType: 'grpo',
  maxCompletionLength: null,
};

export const parseGspoConfig = (input: Partial<GspoConfig> | ConfigInput = {}): E.Either<ConfigError, GspoConfig> =>
  parseObjectiveConfig(
    'gspo',
    {
      ...advantageSpec,
      epsilon: openUnit,
      epsilonHigh: positive,
      beta: nonNegative,
      lossType: lossTypeCheck,
      maxCompletionLength: nullable(positiveInt),
    },
    { ...ADVANTAGE_ALIASES, epsilon_low: 'epsilon', loss_agg_mode: 'lossType' },
    GSPO_DEFAULTS,
    input,
  );

/**
 * GSPO: one importance ratio per sequence, the geometric mean of its token ratios,
 *   s_i = exp((1/L_i) sum_t m (l - l_old)),
 *   J = (1/G) sum_i min(s_i A_i, clip(s_i, 1 - eps_low, 1 + eps_high) A_i)      (eps 3e-4 / 4e-4),
 * implemented as TRL's `importance_sampling_level="sequence"`: s_i broadcast over the row's tokens, then the
 * usual aggregation (`grpo` by default gives exactly the formula above; a zero-length row contributes 0).
 */
export function gspoLoss(batch: RolloutBatch, cfg: GspoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const a = advantageTensor(hostAdvantages(batch, cfg), prep);
    const seqLogRatio = div(sum(mul(boundedLogRatio(prep.logp, prep.old), prep.mask), 1, true), prep.safeLengths); // [B, 1]
    const s = exp(seqLogRatio);
    const objective = minimum(mul(s, a), mul(clamp(s, 1 - cfg.epsilon, 1 + cfg.epsilonHigh), a)); // [B, 1]
    const loss = tokenLoss(neg(objective), prep, cfg, batch); // [B, 1], broadcast over the row's tokens
    const sd = stopGradient(s);
    const low = mul(less(sd, 1 - cfg.epsilon), less(a, 0));
    const high = mul(greater(sd, 1 + cfg.epsilonHigh), greater(a, 0));
    const nonEmpty = greater(sum(prep.mask, 1, true), 0);
    return {
      loss,
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds),
        // Per sequence, counted over tokens as TRL does.
        'clip_ratio/low_mean': maskedMean(low, prep.mask),
        'clip_ratio/high_mean': maskedMean(high, prep.mask),
        'clip_ratio/region_mean': maskedMean(add(low, high), prep.mask),
        'seq_ratio/mean': maskedMean(sd, nonEmpty),
      }),
    };
  });
}

export const GSPO: ObjectiveDefinition<GspoConfig> = {
  name: 'gspo',
  summary: 'GSPO: one clipped ratio per sequence (geometric mean)',
  defaults: GSPO_DEFAULTS,
  parse: parseGspoConfig,
  loss: gspoLoss,
  usesAdvantages: true,
  contrastive: false,
  klToReference: (c) => c.beta > 0,
};
