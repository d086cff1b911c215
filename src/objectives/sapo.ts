import type * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import { tensor } from '../ops/creation.js';
import { div, exp, mul, neg, sigmoid, sub } from '../ops/elementwise.js';
import { nonNegative, nullable, positive, positiveInt } from '../core/validate.js';
import { lossTypeCheck, type LossType } from './aggregate.js';
import {
  advantageTensor,
  ADVANTAGE_ALIASES,
  PAPER_ADVANTAGE_CONFIG,
  advantageSpec,
  type AdvantageConfig,
} from './advantages.js';
import { boundedLogRatio, prepare, type RolloutBatch } from './batch.js';
import { baseMetrics, detachAll, hostAdvantages, tokenLoss, parseObjectiveConfig } from './common.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';

export interface SapoConfig extends AdvantageConfig {
  /** tau_pos, the gate temperature where A > 0 (TRL `sapo_temperature_pos`, 1.0). */
  readonly temperaturePos: number;
  /** tau_neg, where A <= 0 (TRL `sapo_temperature_neg`, 1.05). */
  readonly temperatureNeg: number;
  readonly beta: number;
  readonly lossType: LossType;
  readonly maxCompletionLength: number | null;
}

export const SAPO_DEFAULTS: SapoConfig = {
  ...PAPER_ADVANTAGE_CONFIG,
  temperaturePos: 1.0,
  temperatureNeg: 1.05,
  beta: 0,
  lossType: 'grpo',
  maxCompletionLength: null,
};

export const parseSapoConfig = (input: Partial<SapoConfig> | ConfigInput = {}): E.Either<ConfigError, SapoConfig> =>
  parseObjectiveConfig(
    'sapo',
    {
      ...advantageSpec,
      temperaturePos: positive,
      temperatureNeg: positive,
      beta: nonNegative,
      lossType: lossTypeCheck,
      maxCompletionLength: nullable(positiveInt),
    },
    {
      ...ADVANTAGE_ALIASES,
      sapo_temperature_pos: 'temperaturePos',
      sapo_temperature_neg: 'temperatureNeg',
      tau_pos: 'temperaturePos',
      tau_neg: 'temperatureNeg',
      loss_agg_mode: 'lossType',
    },
    SAPO_DEFAULTS,
    input,
  );

/**
 * SAPO: a smooth, temperature-controlled gate in place of the hard clip,
 *   f(rho) = sigmoid(tau (rho - 1)) * 4 / tau,  tau = tau_pos if A > 0 else tau_neg,
 *   J = (1/B) sum_i (1/L_i) sum_t f(rho_{i,t}) A_i                   (`grpo` aggregation by default)
 * f'(1) = 1, so on-policy the gradient equals the unclipped one (TRL's loss_type "sapo").
 */
export function sapoLoss(batch: RolloutBatch, cfg: SapoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const adv = hostAdvantages(batch, cfg);
    const a = advantageTensor(adv, prep);
    const tau = tensor(
      adv.map((x) => (x > 0 ? cfg.temperaturePos : cfg.temperatureNeg)),
      [prep.b, 1],
      { dtype: prep.dtype, backend: prep.backend },
    );
    const ratio = exp(boundedLogRatio(prep.logp, prep.old));
    const gate = div(mul(sigmoid(mul(tau, sub(ratio, 1))), 4), tau);
    const loss = tokenLoss(neg(mul(gate, a)), prep, cfg, batch);
    return { loss, metrics: detachAll(baseMetrics(prep, batch.rewards, batch.groupIds)) };
  });
}

export const SAPO: ObjectiveDefinition<SapoConfig> = {
  name: 'sapo',
  summary: 'SAPO: soft sigmoid gate instead of a hard clip',
  defaults: SAPO_DEFAULTS,
  parse: parseSapoConfig,
  loss: sapoLoss,
  usesAdvantages: true,
  contrastive: false,
  klToReference: (c) => c.beta > 0,
};
