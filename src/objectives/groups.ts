import type { Backend } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { where } from '../ops/elementwise.js';
import { gather } from '../ops/indexing.js';

/**
 * How rows form groups (one prompt, G rollouts), worked out on the host from `groupIds`. Groups are numbered in
 * order of first appearance; they may differ in size.
 */
export interface GroupLayout {
  /** The distinct group ids, in order of first appearance. */
  readonly keys: readonly number[];
  /** For each row, the index of its group in `keys`. */
  readonly rowGroup: readonly number[];
  /** For each group, its rows in batch order. */
  readonly members: readonly (readonly number[])[];
  /** The largest group size (the width of the [Q, W] grid). */
  readonly width: number;
}

export function groupLayout(groupIds: readonly number[]): GroupLayout {
  const index = new Map<number, number>();
  const keys: number[] = [];
  const members: number[][] = [];
  const rowGroup = groupIds.map((id, row) => {
    let g = index.get(id);
    if (g === undefined) {
      g = keys.length;
      index.set(id, g);
      keys.push(id);
      members.push([]);
    }
    members[g]!.push(row);
    return g;
  });
  return { keys, rowGroup, members, width: Math.max(0, ...members.map((m) => m.length)) };
}

/** Per-group summary of the rewards, computed on the host. */
export interface GroupStats {
  readonly groupId: number;
  readonly size: number;
  /** Rollouts with reward > the positive threshold (N+). */
  readonly positives: number;
  /** N+ / G. */
  readonly passRate: number;
  readonly rewardMean: number;
  /** Population standard deviation of the group's rewards (0 exactly when they are all equal). */
  readonly rewardStd: number;
}

/** Per-group pass rates and reward statistics. A rollout is positive when its reward exceeds `threshold` (0.5). */
export function groupStats(rewards: readonly number[], groupIds: readonly number[], threshold = 0.5): GroupStats[] {
  const layout = groupLayout(groupIds);
  return layout.members.map((rows, g) => {
    const rs = rows.map((i) => rewards[i]!);
    const mean = groupMean(rs);
    const allEqual = rs.every((r) => r === rs[0]);
    const std = allEqual ? 0 : Math.sqrt(rs.reduce((s, r) => s + (r - mean) ** 2, 0) / rs.length);
    const positives = rs.filter((r) => r > threshold).length;
    return {
      groupId: layout.keys[g]!,
      size: rs.length,
      positives,
      passRate: positives / rs.length,
      rewardMean: mean,
      rewardStd: std,
    };
  });
}

/** Mean of a group's values; exactly the common value when they are all equal (a plain sum/n may be off by an ulp). */
export function groupMean(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  if (xs.every((x) => x === xs[0])) return xs[0]!;
  return xs.reduce((s, x) => s + x, 0) / xs.length;
}

/** @internal Index tensors that move per-row values [B] into a padded [Q, W] grid and per-group values [Q] back to rows. */
export interface GroupGrid {
  readonly q: number;
  readonly w: number;
  /** Row index for each grid cell (0 in padding cells), i32 [Q, W]. */
  readonly cellRow: Tensor;
  /** 1 in cells holding a row, 0 in padding, [Q, W] in the float dtype. */
  readonly cellValid: Tensor;
  /** Group index of each row, i32 [B]. */
  readonly rowGroup: Tensor;
}

/** @internal */
export function groupGrid(layout: GroupLayout, dtype: DType, backend: Backend): GroupGrid {
  const q = layout.keys.length;
  const w = layout.width;
  const cellRow = new Int32Array(q * w);
  const cellValid = new Array<number>(q * w).fill(0);
  layout.members.forEach((rows, g) =>
    rows.forEach((row, k) => {
      cellRow[g * w + k] = row;
      cellValid[g * w + k] = 1;
    }),
  );
  return {
    q,
    w,
    cellRow: tensor(cellRow, [q, w], { dtype: 'i32', backend }),
    cellValid: tensor(cellValid, [q, w], { dtype, backend }),
    rowGroup: tensor(Int32Array.from(layout.rowGroup), [layout.rowGroup.length], { dtype: 'i32', backend }),
  };
}

/** @internal Per-row values [B] laid out as [Q, W]; padding cells hold `fill`. */
export function toGrid(x: Tensor, grid: GroupGrid, fill = 0): Tensor {
  return where(grid.cellValid, gather(x, grid.cellRow, 0), fill);
}

/** @internal Per-group values [Q] broadcast back to rows [B]. */
export function toRows(v: Tensor, grid: GroupGrid): Tensor {
  return gather(v, grid.rowGroup, 0);
}
