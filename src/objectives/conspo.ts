import * as E from 'fp-ts/lib/Either.js';
import { ArgumentError } from '../core/errors.js';
import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { add, div, exp, greater, maximum, mul, sqrt, sub, where } from '../ops/elementwise.js';
import { stack } from '../ops/movement.js';
import { logsumexp, sum } from '../ops/reduce.js';
import { nonNegative, oneOf, openUnit, positive, unitHalfOpen } from '../core/validate.js';
import { maskedMean } from './aggregate.js';
import { prepare, type RolloutBatch } from './batch.js';
import {
  baseMetrics,
  checkGroupSizes,
  detachAll,
  hostScalar,
  k3,
  parseObjectiveConfig,
  followEpsilon,
} from './common.js';
import {
  CONTRAST_DEFAULTS,
  GROUP_ALIASES,
  contrastSpec,
  type ContrastGroupConfig,
  contrastGroups,
  contrastMetrics,
  contrastTensors,
  nonEmptyRows,
  type ContrastGroups,
} from './contrast.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';
import { clippedScoresOf } from './discriminative.js';
import { toGrid, toRows } from './groups.js';

export interface ConspoConfig extends ContrastGroupConfig {
  /** Contrastive temperature tau > 0 (paper: 10). */
  readonly tau: number;
  /** Target margin M >= 0 (paper: 0.01). */
  readonly margin: number;
  /** Margin warmup fraction alpha in (0, 1] (paper: 0.3). */
  readonly alpha: number;
  /** 'cosine' (Eq. 16, default), 'fixed' (m = M throughout; Table 6 "w/ fixed margin"), 'none' (m = 0; "w/o scheduled margin"). */
  readonly marginSchedule: 'cosine' | 'fixed' | 'none';
  /** 'infonce' (Eq. 15, default) or 'linear' (Eq. 8's weighted difference; Table 6 "w/o contrastive objective"). */
  readonly contrast: 'infonce' | 'linear';
  /** 'log-likelihood' (default) or 'clipped-ratio' (Eq. 7's s+ and s-; Table 6 "w/o log-likelihood scores"). */
  readonly score: 'log-likelihood' | 'clipped-ratio';
  /** The clip epsilon of the 'clipped-ratio' ablation, (0, 1). */
  readonly epsilon: number;
  /** Its upper epsilon (defaults to `epsilon`). */
  readonly epsilonHigh: number;
  /** Optional k3 KL penalty against `refLogProbs` (token mean), >= 0; 0 as in the paper. */
  readonly beta: number;
}

export const CONSPO_DEFAULTS: ConspoConfig = {
  ...CONTRAST_DEFAULTS,
  tau: 10,
  margin: 0.01,
  alpha: 0.3,
  marginSchedule: 'cosine',
  contrast: 'infonce',
  score: 'log-likelihood',
  epsilon: 0.2,
  epsilonHigh: 0.2,
  beta: 0,
};

/** ConSPO (paper defaults: tau 10, M 0.01, alpha 0.3, cosine margin, InfoNCE, log-likelihood scores). */
export const parseConspoConfig = (
  input: Partial<ConspoConfig> | ConfigInput = {},
): E.Either<ConfigError, ConspoConfig> =>
  parseObjectiveConfig(
    'conspo',
    {
      ...contrastSpec,
      tau: positive,
      margin: nonNegative,
      alpha: unitHalfOpen,
      marginSchedule: oneOf(['cosine', 'fixed', 'none']),
      contrast: oneOf(['infonce', 'linear']),
      score: oneOf(['log-likelihood', 'clipped-ratio']),
      epsilon: openUnit,
      epsilonHigh: positive,
      beta: nonNegative,
    },
    { ...GROUP_ALIASES, M: 'margin', target_margin: 'margin', warmup_ratio: 'alpha' },
    CONSPO_DEFAULTS,
    input,
    (c, given) => E.right(followEpsilon(c, given)),
  );

/**
 * ConSPO (Sections 4.2-4.3): a group-wise InfoNCE objective over length-normalised log-likelihood scores,
 *   s(o) = (1/|o|) sum_t log pi_theta(o_t | q, o_<t),
 *   J_q = (1/N+) sum_i tau log [ exp((s_i^+ - m_t)/tau) / (exp((s_i^+ - m_t)/tau) + sum_j exp(s_j^-/tau)) ]   // Eq. 15
 * with the margin m_t of Eq. 16, averaged over groups. Groups with N+ = 0 or N- = 0 contribute nothing; zero-
 * length completions take no part. The ablations of Table 6 are options: `contrast: 'linear'` (Eq. 8),
 * `score: 'clipped-ratio'` (Eq. 7's s+ for positives, s- for negatives), `marginSchedule: 'none' | 'fixed'`.
 */

/** Eq. 16: m = (M/2)(1 - cos(pi min(lambda/alpha, 1))), lambda the training progress in [0, 1]. */
export function scheduledMargin(lambda: number, targetMargin: number, alpha: number): number {
  const l = Math.min(1, Math.max(0, lambda));
  const rho = Math.min(l / alpha, 1);
  return Math.min(targetMargin, (targetMargin / 2) * (1 - Math.cos(Math.PI * rho)));
}

/** The margin at a training step under the config's schedule. The cosine schedule needs `progress`. */
export function conspoMargin(
  cfg: Pick<ConspoConfig, 'margin' | 'alpha' | 'marginSchedule'>,
  progress?: TrainingProgress,
): number {
  switch (cfg.marginSchedule) {
    case 'none':
      return 0;
    case 'fixed':
      return cfg.margin;
    case 'cosine': {
      if (!progress)
        throw new ArgumentError('conspo', 'the cosine margin schedule (Eq. 16) needs { step, totalSteps }');
      if (!(progress.totalSteps > 0) || !(progress.step >= 0)) {
        throw new ArgumentError(
          'conspo',
          `progress must have step >= 0 and totalSteps > 0, got ${progress.step} / ${progress.totalSteps}`,
        );
      }
      return scheduledMargin(progress.step / progress.totalSteps, cfg.margin, cfg.alpha);
    }
  }
}

export interface ContrastiveOptions {
  readonly tau: number;
  /** m_t, subtracted from each positive's score (Eq. 15). */
  readonly margin: number;
  readonly contrast: 'infonce' | 'linear';
  readonly groupNormalizer: 'all' | 'valid';
}

export type ContrastiveResult = {
  /** J (maximised), a scalar. */
  readonly objective: Tensor;
  /** P_i^+ of Eq. 11 for each positive row of a valid group, 0 elsewhere, [B] (zeros for the linear form). */
  readonly positiveProb: Tensor;
  /** Mean of P_i^+ over the positives of valid groups (0 for the linear form or when there are none). */
  readonly meanPositiveProb: Tensor;
  /** 1 for valid groups, [Q]. */
  readonly validGroups: Tensor;
  /** 1 for positive / negative rows taking part, [B]. */
  readonly positiveRows: Tensor;
  readonly negativeRows: Tensor;
};

/**
 * The group contrast as a function of the sequence scores: positives are scored by `positiveScores` [B],
 * negatives by `negativeScores` [B] (the same tensor for log-likelihood scores). `active` [B] (optional) marks
 * the rows that take part. Differentiate through this to check Lemma 2 (Eqs. 12-14).
 */
export function contrastiveObjective(
  positiveScores: Tensor,
  negativeScores: Tensor,
  groups: ContrastGroups,
  opts: ContrastiveOptions,
  active?: Tensor,
): ContrastiveResult {
  return tidy(() => contrast(positiveScores, negativeScores, groups, opts, active));
}

function contrast(
  positiveScores: Tensor,
  negativeScores: Tensor,
  groups: ContrastGroups,
  opts: ContrastiveOptions,
  active?: Tensor,
): ContrastiveResult {
  const ct = contrastTensors(groups, positiveScores, opts.groupNormalizer, active);
  const shifted = sub(positiveScores, opts.margin); // s_i^+ - m_t
  if (opts.contrast === 'linear') {
    // Eq. 8: sqrt(p(1-p)) (mean_+ (s^+ - m) - mean_- s^-), p = N+ / (N+ + N-).
    const n = maximum(add(ct.nPos, ct.nNeg), 1);
    const p = div(ct.nPos, n);
    const w = mul(ct.valid, sqrt(mul(p, sub(1, p))));
    const rowPos = mul(ct.pos, toRows(div(w, maximum(ct.nPos, 1)), ct.grid));
    const rowNeg = mul(ct.neg, toRows(div(w, maximum(ct.nNeg, 1)), ct.grid));
    const j = sub(sum(mul(rowPos, shifted)), sum(mul(rowNeg, negativeScores)));
    const zero = mul(ct.pos, 0);
    return {
      objective: div(j, ct.groupDivisor),
      positiveProb: zero,
      meanPositiveProb: sum(zero),
      validGroups: ct.valid,
      positiveRows: ct.pos,
      negativeRows: ct.neg,
    };
  }
  const a = div(shifted, opts.tau); // (s_i^+ - m_t) / tau
  const negLse = logsumexp(where(ct.negPool, toGrid(div(negativeScores, opts.tau), ct.grid), -1e30), 1); // log sum_j exp(s_j^-/tau), [Q]
  const logZ = logsumexp(stack([a, toRows(negLse, ct.grid)], 1), 1); // log Z_i, [B]
  const logP = sub(a, logZ); // log P_i^+ (Eq. 11)
  const weight = mul(ct.pos, toRows(div(ct.valid, maximum(ct.nPos, 1)), ct.grid)); // 1/N+ on valid positives
  const j = sum(mul(weight, mul(logP, opts.tau)));
  const counted = greater(weight, 0);
  const positiveProb = mul(counted, exp(logP));
  return {
    objective: div(j, ct.groupDivisor),
    positiveProb,
    meanPositiveProb: div(sum(positiveProb), maximum(sum(counted), 1)),
    validGroups: ct.valid,
    positiveRows: ct.pos,
    negativeRows: ct.neg,
  };
}

/** ConSPO's loss: -J (Eq. 15 averaged over groups) + beta * token-mean k3 when beta > 0. */
export function conspoLoss(batch: RolloutBatch, cfg: ConspoConfig, progress?: TrainingProgress): ObjectiveResult {
  const margin = conspoMargin(cfg, progress);
  return tidy(() => {
    const prep = prepare(batch);
    const groups: ContrastGroups = contrastGroups(batch.rewards, batch.groupIds, cfg.positiveThreshold);
    checkGroupSizes(groups.layout, cfg.numGenerations);
    let sPos: Tensor;
    let sNeg: Tensor;
    if (cfg.score === 'log-likelihood') {
      sPos = sNeg = div(sum(mul(prep.logp, prep.mask), 1), maximum(prep.lengths, 1)); // s_theta(o), length-normalised
    } else {
      const s = clippedScoresOf(prep, cfg.epsilon, cfg.epsilonHigh); // Eq. 7
      sPos = s.plus;
      sNeg = s.minus;
    }
    const active = nonEmptyRows(prep);
    const r = contrastiveObjective(
      sPos,
      sNeg,
      groups,
      { tau: cfg.tau, margin, contrast: cfg.contrast, groupNormalizer: cfg.groupNormalizer },
      active,
    );
    let loss = sub(0, r.objective);
    if (cfg.beta > 0) loss = add(loss, mul(maskedMean(k3(prep), prep.mask), cfg.beta));

    const split = { valid: r.validGroups, pos: r.positiveRows, neg: r.negativeRows };
    return {
      loss,
      metrics: detachAll({
        ...baseMetrics(prep, batch.rewards, batch.groupIds, cfg.positiveThreshold),
        margin: hostScalar(margin, prep),
        'contrastive/pos_prob_mean': r.meanPositiveProb,
        ...contrastMetrics(split, groups.layout.keys.length, sPos, sNeg),
      }),
    };
  });
}

export const CONSPO: ObjectiveDefinition<ConspoConfig> = {
  name: 'conspo',
  summary: 'ConSPO: InfoNCE over sequence scores with a scheduled margin',
  defaults: CONSPO_DEFAULTS,
  parse: parseConspoConfig,
  loss: conspoLoss,
  usesAdvantages: false,
  contrastive: true,
  klToReference: (c) => c.beta > 0,
};
