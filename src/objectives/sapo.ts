import { tidy } from '../core/scope.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { add, div, exp, mul, neg, sigmoid, sub } from '../ops/elementwise.js';
import { aggregate } from './aggregate.js';
import { advantageTensor } from './advantages.js';
import { prepare, type RolloutBatch } from './batch.js';
import { detachAll, hostAdvantages, k3, maxLengthOf, rewardMetrics, tokenMetrics } from './common.js';
import type { SapoConfig } from './config.js';
import type { ObjectiveResult, TrainingProgress } from './types.js';

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
    const tau = tensor(adv.map((x) => (x > 0 ? cfg.temperaturePos : cfg.temperatureNeg)), [prep.b, 1], { dtype: prep.dtype, backend: prep.backend });
    const ratio = exp(sub(prep.logp, prep.old));
    const gate = div(mul(sigmoid(mul(tau, sub(ratio, 1))), 4), tau);
    let perToken: Tensor = neg(mul(gate, a));
    if (cfg.beta > 0) perToken = add(perToken, mul(k3(prep), cfg.beta));
    const loss = aggregate(perToken, prep.mask, cfg.lossType, {
      rows: prep.b,
      maxCompletionLength: maxLengthOf(cfg, batch, prep),
      ...(batch.numItemsInBatch === undefined ? {} : { numItemsInBatch: batch.numItemsInBatch }),
    });
    return { loss, metrics: detachAll({ ...tokenMetrics(prep), ...rewardMetrics(batch.rewards, batch.groupIds, prep) }) };
  });
}
