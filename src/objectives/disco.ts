import type * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { add, div, exp, greater, log, maximum, mul, neg, relu, square, sub, where } from '../ops/elementwise.js';
import { logsumexp, sum } from '../ops/reduce.js';
import { nonNegative, oneOf, positive } from '../core/validate.js';
import { maskedMean } from './aggregate.js';
import { boundedLogRatio, prepare, type Prepared, type RolloutBatch } from './batch.js';
import { baseMetrics, checkGroupSizes, detachAll, parseObjectiveConfig } from './common.js';
import {
  CONTRAST_DEFAULTS,
  GROUP_ALIASES,
  contrastSpec,
  type ContrastGroupConfig,
  contrastGroups,
  contrastMetrics,
  contrastTensors,
  nonEmptyRows,
} from './contrast.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';
import { toGrid } from './groups.js';

export interface DiscoConfig extends ContrastGroupConfig {
  /** 'log-l': s = (1/L) sum_t log pi; 'l-ratio': s = (1/L) sum_t rho (verl `score_func` logL / Lratio). */
  readonly score: 'log-l' | 'l-ratio';
  /** 'disco': mean_+ s - tau log sum_- exp(s / tau); 'disco-b': mean_+ s - mean_- s. */
  readonly variant: 'disco' | 'disco-b';
  /** tau > 0: 10 recommended for 'log-l', 1 for 'l-ratio'. */
  readonly tau: number;
  /** Squared-hinge penalty weight, >= 0 (1e3). */
  readonly beta: number;
  /** KL budget, >= 0 (1e-4). */
  readonly delta: number;
  /** The constrained KL estimate: 'k1' token mean of log pi_old - log pi (default), 'k3' verl's low_var_kl of pi_old from pi. */
  readonly klEstimator: 'k1' | 'k3';
  /** tau log sum exp (default, as in the spec) or tau log mean exp (DisCO's code); they differ by the constant tau log N-. */
  readonly negativeAggregate: 'logsumexp' | 'logmeanexp';
}

export const DISCO_DEFAULTS: DiscoConfig = {
  ...CONTRAST_DEFAULTS,
  score: 'log-l',
  variant: 'disco',
  tau: 10,
  beta: 1e3,
  delta: 1e-4,
  klEstimator: 'k1',
  negativeAggregate: 'logsumexp',
};

export const parseDiscoConfig = (input: Partial<DiscoConfig> | ConfigInput = {}): E.Either<ConfigError, DiscoConfig> =>
  parseObjectiveConfig(
    'disco',
    {
      ...contrastSpec,
      score: oneOf(['log-l', 'l-ratio'], { logL: 'log-l', Lratio: 'l-ratio' }),
      variant: oneOf(['disco', 'disco-b']),
      tau: positive,
      beta: nonNegative,
      delta: nonNegative,
      klEstimator: oneOf(['k1', 'k3'], { kl: 'k1', low_var_kl: 'k3' }),
      negativeAggregate: oneOf(['logsumexp', 'logmeanexp']),
    },
    { ...GROUP_ALIASES, score_func: 'score', kl_type: 'klEstimator' },
    DISCO_DEFAULTS,
    input,
  );

/**
 * DisCO (binary rewards; groups lacking a class are dropped):
 *   scores  s_i = (1/L_i) sum_t m l ('log-l')  or  (1/L_i) sum_t m rho ('l-ratio'),
 *   DisCO-b J_q = mean_+ s - mean_- s,    DisCO J_q = mean_+ s - tau log sum_- exp(s / tau),
 *   loss = -(sum_q J_q) / Q + (beta/2) [KL - delta]_+^2,   KL = token mean of l_old - l ('k1').
 * DisCO's code (verl recipe) differs in values but not gradients: it uses log-mean-exp (`negativeAggregate`),
 * and writes the penalty as sg(beta [KL - delta]_+) * KL, whose gradient is the same as the squared hinge's.
 */
export function discoScores(prep: Prepared, score: DiscoConfig['score']): Tensor {
  const x = score === 'log-l' ? prep.logp : exp(boundedLogRatio(prep.logp, prep.old));
  return div(sum(mul(x, prep.mask), 1), maximum(prep.lengths, 1));
}

export function discoLoss(batch: RolloutBatch, cfg: DiscoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const groups = contrastGroups(batch.rewards, batch.groupIds, cfg.positiveThreshold);
    checkGroupSizes(groups.layout, cfg.numGenerations);
    const s = discoScores(prep, cfg.score);
    const ct = contrastTensors(groups, prep, cfg.groupNormalizer, nonEmptyRows(prep));
    const posMean = div(sum(toGrid(mul(ct.pos, s), ct.grid), 1), maximum(ct.nPos, 1)); // [Q]
    let negTerm: Tensor;
    if (cfg.variant === 'disco-b') {
      negTerm = div(sum(toGrid(mul(ct.neg, s), ct.grid), 1), maximum(ct.nNeg, 1));
    } else {
      const lse = logsumexp(where(ct.negPool, toGrid(div(s, cfg.tau), ct.grid), -1e30), 1);
      const agg = cfg.negativeAggregate === 'logsumexp' ? lse : sub(lse, log(maximum(ct.nNeg, 1)));
      negTerm = mul(agg, cfg.tau);
    }
    const j = div(sum(where(ct.valid, sub(posMean, negTerm), 0)), ct.groupDivisor);

    // k1 = l_old - l; k3 = -r + exp(r) - 1 with r = l - l_old bounded (LOG_RATIO_BOUND) before its exp.
    const r = boundedLogRatio(prep.logp, prep.old);
    const kl = maskedMean(cfg.klEstimator === 'k1' ? sub(prep.old, prep.logp) : sub(add(neg(r), exp(r)), 1), prep.mask);
    const penalty = mul(square(relu(sub(kl, cfg.delta))), cfg.beta / 2);
    const loss = add(sub(0, j), penalty);
    return {
      loss,
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds, cfg.positiveThreshold),
        'disco/kl': kl,
        'disco/constraint_active': greater(kl, cfg.delta),
        'disco/penalty': penalty,
        ...contrastMetrics(ct, ct.grid.q, s),
      }),
    };
  });
}

/** DisCO's KL constraint is to pi_old (`oldLogProbs`), not to the reference policy. */
export const DISCO: ObjectiveDefinition<DiscoConfig> = {
  name: 'disco',
  summary: 'DisCO: score contrast with a squared-hinge KL constraint',
  defaults: DISCO_DEFAULTS,
  parse: parseDiscoConfig,
  loss: discoLoss,
  usesAdvantages: false,
  contrastive: true,
  klToReference: () => false,
};
