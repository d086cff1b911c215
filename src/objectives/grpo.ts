import { tidy } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { tensor } from '../ops/creation.js';
import { add, clamp, exp, greater, less, maximum, minimum, mul, neg, sub, where } from '../ops/elementwise.js';
import { advantageTensor } from './advantages.js';
import { aggregate, maskedMean } from './aggregate.js';
import { prepare, type RolloutBatch } from './batch.js';
import { detachAll, hostAdvantages, hostScalar, k3, maxLengthOf, rewardMetrics, tokenMetrics } from './common.js';
import type { GrpoConfig } from './config.js';
import { applySoftOverlong, dynamicSamplingKeep } from './dapo.js';
import type { Tensor } from '../core/tensor.js';
import type { ObjectiveResult, TrainingProgress } from './types.js';

/**
 * GRPO (Eqs. 3-4) and the variants that share its per-token form: DAPO and Dr. GRPO are this function with
 * other configs (`DAPO_DEFAULTS`, `DR_GRPO_DEFAULTS`).
 *
 * Per token, rho = exp(l - l_old) and (maximised)
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
    const m = keep ? mul(prep.mask, tensor(keep.map(Number), [prep.b, 1], { dtype: prep.dtype, backend: prep.backend })) : prep.mask;
    const a = advantageTensor(adv, prep);

    const ratio = exp(sub(prep.logp, prep.old));
    const clipped = clamp(ratio, 1 - cfg.epsilon, 1 + cfg.epsilonHigh);
    const unclipped = cfg.delta === null ? ratio : clamp(ratio, null, cfg.delta);
    const surrogate = minimum(mul(unclipped, a), mul(clipped, a)); // Eq. 4
    const objective = cfg.dualClip === null ? surrogate : where(less(a, 0), maximum(surrogate, mul(a, cfg.dualClip)), surrogate);
    let perToken = neg(objective);
    if (cfg.beta > 0) perToken = add(perToken, mul(k3(prep), cfg.beta));
    const loss = aggregate(perToken, m, cfg.lossType, {
      rows,
      maxCompletionLength: maxLengthOf(cfg, batch, prep),
      ...(batch.numItemsInBatch === undefined ? {} : { numItemsInBatch: batch.numItemsInBatch }),
    });

    const r = stopGradient(ratio);
    const low = mul(less(r, 1 - cfg.epsilon), less(a, 0));
    const high = mul(greater(r, 1 + cfg.epsilonHigh), greater(a, 0));
    const metrics: Record<string, Tensor> = {
      ...tokenMetrics(prep),
      ...rewardMetrics(rewards, batch.groupIds, prep),
      'clip_ratio/low_mean': maskedMean(low, m),
      'clip_ratio/high_mean': maskedMean(high, m),
      'clip_ratio/region_mean': maskedMean(add(low, high), m),
      kept_rows_frac: hostScalar(rows / prep.b, prep),
    };
    // verl's pg_clipfrac_lower: where A < 0 and the dual clip c A is the active (larger) side.
    if (cfg.dualClip !== null) metrics['dual_clip_fraction'] = maskedMean(mul(less(a, 0), greater(mul(a, cfg.dualClip), stopGradient(surrogate))), m);
    return { loss, metrics: detachAll(metrics) };
  });
}
