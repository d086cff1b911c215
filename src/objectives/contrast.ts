import type { Tensor } from '../core/tensor.js';
import { stopGradient } from '../core/transforms.js';
import { tensor } from '../ops/creation.js';
import { div, greater, maximum, mul, where } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import { finite, nullable, oneOf, type Spec } from '../core/validate.js';
import type { Prepared } from './batch.js';
import { groupSize } from './advantages.js';
import { groupGrid, groupLayout, toGrid, type GroupGrid, type GroupLayout } from './groups.js';

/** Settings shared by the group-contrast objectives (DisCO, ConSPO): positives vs negatives inside a group. */
export interface ContrastGroupConfig {
  /** A rollout is positive when reward > positiveThreshold (binary rewards: r = 1), negative otherwise. */
  readonly positiveThreshold: number;
  /** Divide the sum over valid groups by the number of 'all' groups (DisCO's code) or of 'valid' ones (N+ > 0 and N- > 0). */
  readonly groupNormalizer: 'all' | 'valid';
  readonly numGenerations: number | null;
}

export const CONTRAST_DEFAULTS: ContrastGroupConfig = {
  positiveThreshold: 0.5,
  groupNormalizer: 'all',
  numGenerations: null,
};
export const GROUP_ALIASES = { num_generations: 'numGenerations', G: 'numGenerations' } as const;

export const contrastSpec: Spec<ContrastGroupConfig> = {
  positiveThreshold: finite,
  groupNormalizer: oneOf(['all', 'valid']),
  numGenerations: nullable(groupSize),
};

/**
 * Positives and negatives inside each group, for the objectives that contrast them (DisCO, ConSPO, the
 * discriminative form). The split is on the host (rewards); which rows take part can also depend on tensors
 * (a zero-length completion takes no part), so the counts N+ and N- are tensors.
 */
export interface ContrastGroups {
  readonly layout: GroupLayout;
  /** Reward > threshold, per row. */
  readonly positive: readonly boolean[];
}

export function contrastGroups(
  rewards: readonly number[],
  groupIds: readonly number[],
  threshold = 0.5,
): ContrastGroups {
  return { layout: groupLayout(groupIds), positive: rewards.map((r) => r > threshold) };
}

/** @internal The tensors of a contrast: grid, per-row and per-cell class indicators, counts and group validity. */
export interface ContrastTensors {
  readonly grid: GroupGrid;
  /** 1 for a positive row taking part, [B]. */
  readonly pos: Tensor;
  /** 1 for a negative row taking part, [B]. */
  readonly neg: Tensor;
  /** N+ and N- per group, [Q]. */
  readonly nPos: Tensor;
  readonly nNeg: Tensor;
  /** 1 where the group has N+ > 0 and N- > 0, [Q]. Other groups contribute nothing. */
  readonly valid: Tensor;
  /** Cells over which a group's negatives are pooled ([Q, W], 0/1): its negatives when N- > 0, else all its rows (so the pool is never empty and every log-sum-exp stays finite). */
  readonly negPool: Tensor;
  /** The divisor of the sum over groups: Q ('all') or max(1, number of valid groups) ('valid'). */
  readonly groupDivisor: Tensor | number;
}

/** @internal `active` [B] (optional): 1 for rows that take part. */
export function contrastTensors(
  groups: ContrastGroups,
  like: Pick<Prepared, 'dtype' | 'backend'>,
  normalizer: 'all' | 'valid',
  active?: Tensor,
): ContrastTensors {
  const opts = { dtype: like.dtype, backend: like.backend };
  const grid = groupGrid(groups.layout, like.dtype, like.backend);
  const b = groups.positive.length;
  const posHost = tensor(groups.positive.map(Number), [b], opts);
  const negHost = tensor(
    groups.positive.map((p) => (p ? 0 : 1)),
    [b],
    opts,
  );
  const pos = active ? mul(posHost, active) : posHost;
  const neg = active ? mul(negHost, active) : negHost;
  const negCells = toGrid(neg, grid);
  const nPos = sum(toGrid(pos, grid), 1);
  const nNeg = sum(negCells, 1);
  const valid = mul(greater(nPos, 0), greater(nNeg, 0));
  const negPool = where(greater(sum(negCells, 1, true), 0), negCells, grid.cellValid);
  const groupDivisor = normalizer === 'all' ? Math.max(1, grid.q) : maximum(sum(valid), 1);
  return { grid, pos, neg, nPos, nNeg, valid, negPool, groupDivisor };
}

/** @internal 1 where the row has at least one completion token, [B]. */
export const nonEmptyRows = (prep: Prepared): Tensor => greater(prep.lengths, 0);

/**
 * @internal The metrics a group contrast reports: the share of its `groupCount` groups that hold both classes, and the mean
 * score (detached) of the positive and of the negative rows taking part. Negatives are scored by `positiveScores`
 * too unless their own scores are given.
 */
export function contrastMetrics(
  split: Pick<ContrastTensors, 'valid' | 'pos' | 'neg'>,
  groupCount: number,
  positiveScores: Tensor,
  negativeScores: Tensor = positiveScores,
): Record<string, Tensor> {
  return {
    'groups/valid_frac': div(sum(split.valid), Math.max(1, groupCount)),
    'score/pos_mean': div(sum(mul(split.pos, stopGradient(positiveScores))), maximum(sum(split.pos), 1)),
    'score/neg_mean': div(sum(mul(split.neg, stopGradient(negativeScores))), maximum(sum(split.neg), 1)),
  };
}
