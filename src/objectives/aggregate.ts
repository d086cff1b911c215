import { oneOf } from '../core/validate.js';
import type { Tensor } from '../core/tensor.js';
import { div, maximum, mul } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';

/**
 * Loss aggregation: how per-token terms x_{i,t} become one scalar. Canonical names are TRL's; verl's
 * `loss_agg_mode` names are accepted as aliases by `parseLossType`.
 *
 * | name (TRL / verl)                      | value                                                   |
 * |----------------------------------------|---------------------------------------------------------|
 * | `grpo` / `seq-mean-token-mean`          | (1/B) sum_i (sum_t m x) / max(1, L_i)   (paper Eq. 3)    |
 * | `dapo` / `token-mean`                   | sum_{i,t} m x / N, N = numItemsInBatch ?? max(1, sum m)  |
 * | `dr_grpo` / `seq-mean-token-sum-norm`   | sum_{i,t} m x / (B * maxCompletionLength)               |
 * | `bnpo`                                  | sum_{i,t} m x / max(1, sum m) over this (micro-)batch    |
 *
 * `dapo` and `bnpo` differ only when a micro-batch is normalised by the token count of the whole batch (TRL's
 * `num_items_in_batch`, here `numItemsInBatch`). B is the number of rows that count (rows dropped by DAPO's
 * dynamic sampling do not).
 */
export type LossType = 'grpo' | 'dapo' | 'dr_grpo' | 'bnpo';

export const LOSS_TYPE_ALIASES: Readonly<Record<string, LossType>> = {
  grpo: 'grpo',
  'seq-mean-token-mean': 'grpo',
  dapo: 'dapo',
  'token-mean': 'dapo',
  dr_grpo: 'dr_grpo',
  'seq-mean-token-sum-norm': 'dr_grpo',
  bnpo: 'bnpo',
};

/** The canonical loss type for a TRL or verl name, or undefined. */
export const parseLossType = (name: string): LossType | undefined => LOSS_TYPE_ALIASES[name];

export interface AggregateOptions {
  /** Rows that count (B). */
  readonly rows: number;
  /** The `dr_grpo` normaliser. */
  readonly maxCompletionLength: number;
  /** The `dapo` normaliser; this batch's token count when absent. */
  readonly numItemsInBatch?: number;
}

/** Aggregate per-token terms x [B, T] under mask m [B, T] into a scalar. x must be finite (0 at padding is fine). */
export function aggregate(x: Tensor, m: Tensor, lossType: LossType, opts: AggregateOptions): Tensor {
  const masked = mul(x, m);
  switch (lossType) {
    case 'grpo':
      return div(sum(div(sum(masked, 1), maximum(sum(m, 1), 1))), Math.max(1, opts.rows));
    case 'dapo':
      return div(sum(masked), opts.numItemsInBatch ?? maximum(sum(m), 1));
    case 'bnpo':
      return div(sum(masked), maximum(sum(m), 1));
    case 'dr_grpo':
      return div(sum(masked), Math.max(1, opts.rows) * opts.maxCompletionLength);
  }
}

/** Token mean of x over the mask: sum(m x) / max(1, sum m). */
export function maskedMean(x: Tensor, m: Tensor): Tensor {
  return div(sum(mul(x, m)), maximum(sum(m), 1));
}

/** A loss type by its name here, in TRL or in verl. */
export const lossTypeCheck = oneOf<LossType>(['grpo', 'dapo', 'dr_grpo', 'bnpo'], LOSS_TYPE_ALIASES);
