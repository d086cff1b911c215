import * as E from 'fp-ts/lib/Either.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { gather } from '../ops/indexing.js';
import { nonNegative, nonNegativeInt, nullable, positiveInt, record, type Check, type Spec } from '../core/validate.js';
import type { RolloutBatch } from './batch.js';
import { BatchError } from './errors.js';
import { groupLayout } from './groups.js';

/** DAPO's soft overlong punishment (added to the reward): see `softOverlongPenalty`. */
export interface OverlongConfig {
  /** L_max, the maximum completion length (TRL `max_completion_len`). */
  readonly maxLength: number;
  /** L_cache, the soft punishment interval (TRL `soft_punish_cache`, verl `overlong_buffer.len`). */
  readonly cacheLength: number;
  /** Multiplier of the penalty (verl `overlong_buffer.penalty_factor`), 1 in DAPO. */
  readonly penaltyFactor: number;
}

const overlongSpec: Spec<OverlongConfig> = {
  maxLength: positiveInt,
  cacheLength: nonNegativeInt,
  penaltyFactor: nonNegative,
};
export const overlongCheck: Check<OverlongConfig | null> = nullable((v) =>
  typeof v === 'object' && v !== null && !('maxLength' in v) && !('max_length' in v) && !('max_completion_len' in v)
    ? E.left({ path: ['maxLength'], reason: 'is required' })
    : record<OverlongConfig>(
        overlongSpec,
        { max_completion_len: 'maxLength', soft_punish_cache: 'cacheLength', len: 'cacheLength' },
        { maxLength: 1, cacheLength: 0, penaltyFactor: 1 },
      )(v),
);

/** DAPO's host-side pieces: the soft overlong reward and the dynamic-sampling filter. */

/**
 * DAPO's soft overlong punishment for a completion of `length` tokens:
 * 0 if length <= L_max - L_cache; ((L_max - L_cache) - length) / L_cache if L_max - L_cache < length <= L_max; -1 beyond.
 */
export function softOverlongPenalty(length: number, maxLength: number, cacheLength: number): number {
  const expected = maxLength - cacheLength;
  if (length <= expected) return 0;
  if (length <= maxLength) return (expected - length) / cacheLength;
  return -1;
}

/** Rewards with the soft overlong punishment added (times `penaltyFactor`). */
export function applySoftOverlong(
  rewards: readonly number[],
  lengths: readonly number[] | undefined,
  cfg: OverlongConfig,
): number[] {
  if (lengths === undefined)
    throw new BatchError('missing', 'lengths', 'is required by the soft overlong reward (DAPO `overlong`)');
  if (lengths.length !== rewards.length)
    throw new BatchError('shape', 'lengths', `has length ${lengths.length}, rewards ${rewards.length}`);
  return rewards.map(
    (r, i) => r + cfg.penaltyFactor * softOverlongPenalty(lengths[i]!, cfg.maxLength, cfg.cacheLength),
  );
}

/**
 * DAPO's dynamic-sampling filter: for each row, whether its group is kept, i.e. its rewards are not all equal
 * (0 < N+ < G for binary rewards; verl's `filter_groups` keeps groups with reward std > 0). The `dapo` objective
 * drops the other rows from the loss; the trainer does not resample (verl does, until enough groups are kept:
 * `selectRolloutRows` takes the kept rows for a caller that wants to).
 */
export function dynamicSamplingKeep(rewards: readonly number[], groupIds: readonly number[]): boolean[] {
  const keep = new Array<boolean>(rewards.length).fill(false);
  for (const rows of groupLayout(groupIds).members) {
    const r0 = rewards[rows[0]!]!;
    const varied = rows.some((i) => rewards[i] !== r0);
    for (const i of rows) keep[i] = varied;
  }
  return keep;
}

/** The sub-batch of the given rows (tensors gathered along axis 0, host arrays picked), e.g. the rows DAPO keeps. */
export function selectRolloutRows(batch: RolloutBatch, rows: readonly number[]): RolloutBatch {
  const idx = tensor(Int32Array.from(rows), [rows.length], { dtype: 'i32', backend: batch.logProbs.backend });
  const pick = (t: Tensor | undefined): Tensor | undefined => t && gather(t, idx, 0);
  const host = (xs: readonly number[] | undefined): number[] | undefined => xs && rows.map((i) => xs[i]!);
  const out: RolloutBatch = {
    ...batch,
    logProbs: pick(batch.logProbs)!,
    mask: pick(batch.mask)!,
    rewards: host(batch.rewards)!,
    groupIds: host(batch.groupIds)!,
  };
  const optional: Partial<Record<'oldLogProbs' | 'refLogProbs', Tensor>> = {};
  if (batch.oldLogProbs) optional.oldLogProbs = pick(batch.oldLogProbs)!;
  if (batch.refLogProbs) optional.refLogProbs = pick(batch.refLogProbs)!;
  const extra: { advantages?: number[]; lengths?: number[] } = {};
  if (batch.advantages) extra.advantages = host(batch.advantages)!;
  if (batch.lengths) extra.lengths = host(batch.lengths)!;
  return { ...out, ...optional, ...extra };
}
