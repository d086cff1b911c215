import type * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { clamp, exp, greater, mul, neg } from '../ops/elementwise.js';
import { nonNegative, nullable, num, openUnit, positiveInt } from '../core/validate.js';
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

export interface CispoConfig extends AdvantageConfig {
  /**
   * The absolute cap on the detached IS weight, min(rho, epsilonMax); >= 1. 5.0 as TRL recommends. TRL calls it
   * `epsilon_high` (accepted as an alias here): a value below 1, such as the clip default 0.2 or 0.28, would scale
   * even on-policy tokens down and is rejected.
   */
  readonly epsilonMax: number;
  /** The paper's optional lower clip: weight >= 1 - epsilonLow, in (0, 1); null (off) as in practice. */
  readonly epsilonLow: number | null;
  readonly beta: number;
  /** 'dapo' (token mean over the batch, the paper's 1 / sum L) by default. */
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

const atLeastOne = num(
  (x) => x >= 1,
  'must be >= 1 (an absolute cap on the IS weight; a cap below 1 shrinks even on-policy tokens)',
);

export const CISPO_DEFAULTS: CispoConfig = {
  ...PAPER_ADVANTAGE_CONFIG,
  epsilonMax: 5.0,
  epsilonLow: null,
  beta: 0,
  lossType: 'dapo',
  maxCompletionLength: null,
};

export const parseCispoConfig = (input: Partial<CispoConfig> | ConfigInput = {}): E.Either<ConfigError, CispoConfig> =>
  parseObjectiveConfig(
    'cispo',
    {
      ...advantageSpec,
      epsilonMax: atLeastOne,
      epsilonLow: nullable(openUnit),
      beta: nonNegative,
      lossType: lossTypeCheck,
      maxCompletionLength: nullable(positiveInt),
    },
    {
      ...ADVANTAGE_ALIASES,
      epsilon_high: 'epsilonMax',
      epsilonHigh: 'epsilonMax',
      epsilon_max: 'epsilonMax',
      epsilon_low: 'epsilonLow',
      loss_agg_mode: 'lossType',
    },
    CISPO_DEFAULTS,
    input,
  );

/**
 * CISPO: a REINFORCE-style surrogate whose token weight is the clipped, detached IS ratio,
 *   J = (1 / sum L) sum_{i,t} sg(min(rho, eps_max)) A_i l_{i,t}        (`dapo` aggregation = 1 / sum L)
 * with `epsilonMax` an absolute cap (TRL's `epsilon_high` for loss_type "cispo", recommended 5.0) and the
 * paper's optional lower clip max(., 1 - epsilonLow). Only the gradient is meaningful: at rho = 1 the value is
 * -(1/sum L) sum A l, not 0. Metric cispo_clip_ratio: tokens whose weight was capped.
 */
export function cispoLoss(batch: RolloutBatch, cfg: CispoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const a = advantageTensor(hostAdvantages(batch, cfg), prep);
    const ratio = stopGradient(exp(boundedLogRatio(prep.logp, prep.old)));
    const weight = clamp(ratio, cfg.epsilonLow === null ? null : 1 - cfg.epsilonLow, cfg.epsilonMax);
    const loss = tokenLoss(neg(mul(mul(weight, a), prep.logp)), prep, cfg, batch);
    return {
      loss,
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds),
        cispo_clip_ratio: maskedMean(greater(ratio, cfg.epsilonMax), prep.mask),
      }),
    };
  });
}

export const CISPO: ObjectiveDefinition<CispoConfig> = {
  name: 'cispo',
  summary: 'CISPO: capped, detached importance weights',
  defaults: CISPO_DEFAULTS,
  parse: parseCispoConfig,
  loss: cispoLoss,
  usesAdvantages: true,
  contrastive: false,
  klToReference: (c) => c.beta > 0,
};
