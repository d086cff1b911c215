import type * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { add, clamp, div, exp, greater, maximum, minimum, mul, neg, notEqual, where } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import { nonNegative, nullable, openUnit, positive } from '../core/validate.js';
import {
  advantageTensor,
  ADVANTAGE_ALIASES,
  PAPER_ADVANTAGE_CONFIG,
  advantageSpec,
  type AdvantageConfig,
} from './advantages.js';
import { maskedMean } from './aggregate.js';
import { boundedLogRatio, prepare, type RolloutBatch } from './batch.js';
import { baseMetrics, detachAll, hostAdvantages, k3, parseObjectiveConfig } from './common.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';

export interface GmpoConfig extends AdvantageConfig {
  /** Clip range in log space, (0, 1): 0.4 in the GMPO paper (ratio in [e^-0.4, e^0.4]); the lower side's. */
  readonly epsilon: number;
  /**
   * The upper side's clip in log space, > 0; null: `epsilon` (the paper's symmetric range). verl's `geo_mean`
   * clips to [-clip_ratio_low, clip_ratio_high], which the verl adapter's `conventions: 'verl'` reads into these.
   */
  readonly epsilonHigh: number | null;
  readonly beta: number;
}

export const GMPO_DEFAULTS: GmpoConfig = { ...PAPER_ADVANTAGE_CONFIG, epsilon: 0.4, epsilonHigh: null, beta: 0 };

export const parseGmpoConfig = (input: Partial<GmpoConfig> | ConfigInput = {}): E.Either<ConfigError, GmpoConfig> =>
  parseObjectiveConfig(
    'gmpo',
    { ...advantageSpec, epsilon: openUnit, epsilonHigh: nullable(positive), beta: nonNegative },
    ADVANTAGE_ALIASES,
    GMPO_DEFAULTS,
    input,
  );

/**
 * GMPO: the geometric mean of token ratios, clipped token by token in log space.
 *   d_t = l - l_old (bounded, LOG_RATIO_BOUND), c_t = clamp(d_t, -eps, eps_high),
 *   d~_t = min(d_t, c_t) if A > 0 else max(d_t, c_t),
 *   ratio_i = exp((1/L_i) sum_t m d~_t),  J = (1/B) sum_i [L_i > 0] A_i ratio_i     (eps = eps_high = 0.4).
 * A zero-length row contributes 0 (its ratio would be exp(0) = 1). beta > 0 adds beta * token-mean k3.
 */
export function gmpoLoss(batch: RolloutBatch, cfg: GmpoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const a = advantageTensor(hostAdvantages(batch, cfg), prep); // [B, 1]
    const d = boundedLogRatio(prep.logp, prep.old);
    const c = clamp(d, -cfg.epsilon, cfg.epsilonHigh ?? cfg.epsilon);
    const dTilde = where(greater(a, 0), minimum(d, c), maximum(d, c));
    const ratio = exp(div(sum(mul(dTilde, prep.mask), 1, true), prep.safeLengths)); // [B, 1]
    const nonEmpty = greater(sum(prep.mask, 1, true), 0);
    const j = div(sum(mul(mul(a, ratio), nonEmpty)), prep.b);
    let loss = neg(j);
    if (cfg.beta > 0) loss = add(loss, mul(maskedMean(k3(prep), prep.mask), cfg.beta));
    const clipped = notEqual(stopGradient(dTilde), stopGradient(d));
    return {
      loss,
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds),
        'clip_ratio/region_mean': maskedMean(clipped, prep.mask),
        'seq_ratio/mean': div(sum(mul(stopGradient(ratio), nonEmpty)), maximum(sum(nonEmpty), 1)),
      }),
    };
  });
}

export const GMPO: ObjectiveDefinition<GmpoConfig> = {
  name: 'gmpo',
  summary: 'GMPO: geometric mean of clipped token ratios',
  defaults: GMPO_DEFAULTS,
  parse: parseGmpoConfig,
  loss: gmpoLoss,
  usesAdvantages: true,
  contrastive: false,
  klToReference: (c) => c.beta > 0,
};
