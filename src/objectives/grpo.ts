import * as E from 'fp-ts/lib/Either.js';
import { tidy } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { tensor } from '../ops/creation.js';
import { add, clamp, exp, greater, less, maximum, minimum, mul, neg, where } from '../ops/elementwise.js';
import {
  aboveOne,
  bool,
  nonNegative,
  nullable,
  openUnit,
  positive,
  positiveInt,
  type Aliases,
  type Post,
  type Spec,
} from '../core/validate.js';
import type { Tensor } from '../core/tensor.js';
import {
  advantageTensor,
  ADVANTAGE_ALIASES,
  PAPER_ADVANTAGE_CONFIG,
  advantageSpec,
  type AdvantageConfig,
} from './advantages.js';
import { maskedMean, lossTypeCheck, type LossType } from './aggregate.js';
import { boundedLogRatio, prepare, type RolloutBatch } from './batch.js';
import {
  baseMetrics,
  detachAll,
  hostAdvantages,
  hostScalar,
  tokenLoss,
  followEpsilon,
  parseObjectiveConfig,
} from './common.js';
import { applySoftOverlong, dynamicSamplingKeep, overlongCheck, type OverlongConfig } from './dapo.js';
import type { ConfigError } from './errors.js';
import type { ConfigInput, ObjectiveResult, TrainingProgress, ObjectiveDefinition } from './types.js';

/** GRPO and its token-level relatives (DAPO, Dr. GRPO are this record with other defaults). */
export interface GrpoConfig extends AdvantageConfig {
  /** Lower clip epsilon_low, in (0, 1). TRL `epsilon`. */
  readonly epsilon: number;
  /** Upper clip epsilon_high > 0. TRL `epsilon_high`; for GRPO and Dr. GRPO it defaults to `epsilon`. */
  readonly epsilonHigh: number;
  /** KL coefficient for the k3 estimator against `refLogProbs`. 0 as in TRL (DeepSeekMath used 0.04). */
  readonly beta: number;
  /** Aggregation (TRL `loss_type`, verl `loss_agg_mode` names accepted). */
  readonly lossType: LossType;
  /** verl's dual-clip constant `clip_ratio_c` (3.0 in verl) for A < 0, > 1; null: off. */
  readonly dualClip: number | null;
  /** TRL's two-sided clip `delta`: the unclipped ratio is capped at delta (> 1); null: off. */
  readonly delta: number | null;
  /** The `dr_grpo` normaliser (TRL `max_completion_length`); null: the batch's, else its width T. */
  readonly maxCompletionLength: number | null;
  /** DAPO's dynamic-sampling filter: drop groups whose rewards are all equal (0 < N+ < G for binary rewards). */
  readonly dynamicSampling: boolean;
  /** DAPO's soft overlong reward shaping (needs `batch.lengths`); null: off. */
  readonly overlong: OverlongConfig | null;
}

export const GRPO_DEFAULTS: GrpoConfig = {
  ...PAPER_ADVANTAGE_CONFIG,
  epsilon: 0.2,
  epsilonHigh: 0.2,
  beta: 0,
  lossType: 'grpo',
  dualClip: null,
  delta: null,
  maxCompletionLength: null,
  dynamicSampling: false,
  overlong: null,
};
/** DAPO: clip-higher (0.2 / 0.28), token-mean, no KL, dynamic sampling on. Overlong shaping needs lengths limits: off until set. */
export const DAPO_DEFAULTS: GrpoConfig = {
  ...GRPO_DEFAULTS,
  epsilonHigh: 0.28,
  lossType: 'dapo',
  dynamicSampling: true,
};
/** Dr. GRPO: A = r - mean (no std), `dr_grpo` aggregation. */
export const DR_GRPO_DEFAULTS: GrpoConfig = { ...GRPO_DEFAULTS, scaleRewards: 'none', lossType: 'dr_grpo' };
const grpoSpec: Spec<GrpoConfig> = {
  ...advantageSpec,
  epsilon: openUnit,
  epsilonHigh: positive,
  beta: nonNegative,
  lossType: lossTypeCheck,
  dualClip: nullable(aboveOne),
  delta: nullable(aboveOne),
  maxCompletionLength: nullable(positiveInt),
  dynamicSampling: bool,
  overlong: overlongCheck,
};

function grpoPost(follow: boolean): Post<GrpoConfig> {
  return (c0, given) => {
    const c = follow ? followEpsilon(c0, given) : c0;
    if (c.overlong && c.overlong.cacheLength >= c.overlong.maxLength) {
      return E.left({
        path: ['overlong', 'cacheLength'],
        reason: `must be < overlong.maxLength (${c.overlong.maxLength})`,
      });
    }
    return E.right(c);
  };
}

const GRPO_ALIASES: Aliases<GrpoConfig> = {
  ...ADVANTAGE_ALIASES,
  epsilon_low: 'epsilon',
  clip_ratio_low: 'epsilon',
  clip_ratio_high: 'epsilonHigh',
  clip_ratio_c: 'dualClip',
  loss_agg_mode: 'lossType',
};

/** GRPO (paper defaults: eps 0.2, beta 0, `grpo` aggregation, population std). */
export const parseGrpoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  parseObjectiveConfig('grpo', grpoSpec, GRPO_ALIASES, GRPO_DEFAULTS, input, grpoPost(true));
/** DAPO (eps 0.2 / 0.28, `dapo` aggregation, dynamic sampling). */
export const parseDapoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  parseObjectiveConfig('dapo', grpoSpec, GRPO_ALIASES, DAPO_DEFAULTS, input, grpoPost(false));
/** Dr. GRPO (no std scaling, `dr_grpo` aggregation). */
export const parseDrGrpoConfig = (input: Partial<GrpoConfig> | ConfigInput = {}): E.Either<ConfigError, GrpoConfig> =>
  parseObjectiveConfig('dr_grpo', grpoSpec, GRPO_ALIASES, DR_GRPO_DEFAULTS, input, grpoPost(true));

/**
 * GRPO (Eqs. 3-4) and the variants that share its per-token form: DAPO and Dr. GRPO are this function with
 * other configs (`DAPO_DEFAULTS`, `DR_GRPO_DEFAULTS`).
 *
 * Per token, rho = exp(l - l_old) (the log-ratio bounded to +-20, `LOG_RATIO_BOUND`) and (maximised)
 *   f(rho, A) = min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A)        // Eq. 4 (asymmetric clip: DAPO)
 * with TRL's `delta` capping the unclipped rho, and verl's dual clip f <- max(f, c A) where A < 0. The loss per
 * token is -f + beta * k3 (TRL adds the KL per token, before aggregation); `lossType` aggregates it.
 *
 * DAPO extras: `dynamicSampling` drops the rows of groups whose (raw) rewards are all equal from the loss (they
 * would only dilute a token mean); `overlong` adds the soft overlong punishment to the rewards before the
 * advantages are computed (needs `batch.lengths`).
 *
 * Metrics: TRL's clip_ratio/low_mean (rho < 1 - eps_low where A < 0), clip_ratio/high_mean (rho > 1 + eps_high
 * where A > 0), clip_ratio/region_mean; dual_clip_fraction; kl; ratio/mean; the reward metrics.
 */
export function grpoLoss(batch: RolloutBatch, cfg: GrpoConfig, _progress?: TrainingProgress): ObjectiveResult {
  return tidy(() => {
    const prep = prepare(batch);
    const rewards = cfg.overlong ? applySoftOverlong(batch.rewards, batch.lengths, cfg.overlong) : batch.rewards;
    const adv = hostAdvantages(batch, cfg, rewards);
    const keep = cfg.dynamicSampling ? dynamicSamplingKeep(batch.rewards, batch.groupIds) : null;
    const rows = keep ? keep.filter(Boolean).length : prep.b;
    const m = keep
      ? mul(prep.mask, tensor(keep.map(Number), [prep.b, 1], { dtype: prep.dtype, backend: prep.backend }))
      : prep.mask;
    const a = advantageTensor(adv, prep);

    const ratio = exp(boundedLogRatio(prep.logp, prep.old));
    const clipped = clamp(ratio, 1 - cfg.epsilon, 1 + cfg.epsilonHigh);
    const unclipped = cfg.delta === null ? ratio : clamp(ratio, null, cfg.delta);
    const surrogate = minimum(mul(unclipped, a), mul(clipped, a)); // Eq. 4
    const objective =
      cfg.dualClip === null ? surrogate : where(less(a, 0), maximum(surrogate, mul(a, cfg.dualClip)), surrogate);
    const loss = tokenLoss(neg(objective), prep, cfg, batch, m, rows);

    const r = stopGradient(ratio);
    const low = mul(less(r, 1 - cfg.epsilon), less(a, 0));
    const high = mul(greater(r, 1 + cfg.epsilonHigh), greater(a, 0));
    const metrics: Record<string, Tensor> = {
      ...baseMetrics(prep, rewards, batch.groupIds),
      'clip_ratio/low_mean': maskedMean(low, m),
      'clip_ratio/high_mean': maskedMean(high, m),
      'clip_ratio/region_mean': maskedMean(add(low, high), m),
      kept_rows_frac: hostScalar(rows / prep.b, prep),
    };
    // verl's pg_clipfrac_lower: where A < 0 and the dual clip c A is the active (larger) side.
    if (cfg.dualClip !== null)
      metrics.dual_clip_fraction = maskedMean(
        mul(less(a, 0), greater(mul(a, cfg.dualClip), stopGradient(surrogate))),
        m,
      );
    return { loss, metrics: detachAll(metrics) };
  });
}

/** Clipped token-level surrogates that weigh rollouts by advantages; a KL term when beta > 0. */
const advantageObjective = (
  name: string,
  summary: string,
  defaults: GrpoConfig,
  parse: ObjectiveDefinition<GrpoConfig>['parse'],
): ObjectiveDefinition<GrpoConfig> => ({
  name,
  summary,
  defaults,
  parse,
  loss: grpoLoss,
  usesAdvantages: true,
  contrastive: false,
  klToReference: (c) => c.beta > 0,
});
export const GRPO = advantageObjective(
  'grpo',
  'GRPO: clipped ratio x group-normalised advantage',
  GRPO_DEFAULTS,
  parseGrpoConfig,
);
export const DAPO = advantageObjective(
  'dapo',
  'DAPO: clip-higher, token-mean, dynamic-sampling filter',
  DAPO_DEFAULTS,
  parseDapoConfig,
);
export const DR_GRPO = advantageObjective(
  'dr_grpo',
  'Dr. GRPO: no std scaling, constant normaliser',
  DR_GRPO_DEFAULTS,
  parseDrGrpoConfig,
);
