import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { stopGradient } from '../core/transforms.js';
import { add, clamp, exp, greater, mul, neg, sub } from '../ops/elementwise.js';
import { advantageTensor } from './advantages.js';
import { aggregate, maskedMean } from './aggregate.js';
import { prepare, type RolloutBatch } from './batch.js';
import { detachAll, hostAdvantages, k3, maxLengthOf, rewardMetrics, tokenMetrics } from './common.js';
import type { CispoConfig } from './config.js';
import type { ObjectiveResult, TrainingProgress } from './types.js';

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
    const ratio = stopGradient(exp(sub(prep.logp, prep.old)));
    const weight = clamp(ratio, cfg.epsilonLow === null ? null : 1 - cfg.epsilonLow, cfg.epsilonMax);
    let perToken: Tensor = neg(mul(mul(weight, a), prep.logp));
    if (cfg.beta > 0) perToken = add(perToken, mul(k3(prep), cfg.beta));
    const loss = aggregate(perToken, prep.mask, cfg.lossType, {
      rows: prep.b,
      maxCompletionLength: maxLengthOf(cfg, batch, prep),
      ...(batch.numItemsInBatch === undefined ? {} : { numItemsInBatch: batch.numItemsInBatch }),
    });
    return {
      loss,
      metrics: detachAll({
        ...tokenMetrics(prep),
        ...rewardMetrics(batch.rewards, batch.groupIds, prep),
        cispo_clip_ratio: maskedMean(greater(ratio, cfg.epsilonMax), prep.mask),
      }),
    };
  });
}
