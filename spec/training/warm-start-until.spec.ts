/**
 * `warmStartUntil` (issue 21): the warm-start ends at the first validation check (every WARM_START_CHECK_EVERY
 * steps) where greedy pass@1 on WARM_START_VALIDATION training-split problems reaches the target, else it runs
 * all `warmStartSteps`.
 */
import { describe, expect, it } from 'vitest';
import {
  additionTask,
  train,
  WARM_START_CHECK_EVERY,
  withReward,
  type MetricRecord,
  type RewardFn,
} from '../../src/index.js';
import { tinyRun } from './helpers/tiny-run.js';

async function warmStart(reward: RewardFn, until: number | null): Promise<MetricRecord[]> {
  const records: MetricRecord[] = [];
  await train(tinyRun({ warmStartSteps: 60, warmStartUntil: until, steps: 1 }), {
    task: withReward(additionTask(), reward),
    onRecord: (r) => records.push(r),
    onWarning: () => {},
  });
  return records;
}

const warmStartSteps = (rs: MetricRecord[]): number => rs.filter((r) => r.phase === 'warmstart').length;
const checks = (rs: MetricRecord[]): [number, number][] =>
  rs.filter((r) => r.label === 'warmstart-validation').map((r) => [r.step, Number(r.pass_at_1)]);

describe('warmStartUntil', () => {
  it('ends the warm-start at the first check that reaches the target', async () => {
    expect(WARM_START_CHECK_EVERY).toBe(2);
    const rs = await warmStart(() => 1, 0.5);
    expect(warmStartSteps(rs)).toBe(2);
    expect(checks(rs)).toEqual([[2, 1]]);
    // RL follows, after the held-out evaluation of the warm-started policy.
    expect(rs.some((r) => r.phase === 'eval' && r.label === 'after-warmstart')).toBe(true);
    expect(rs.filter((r) => r.phase === 'rl')).toHaveLength(1);
  });

  it('runs every warm-start step when the target is never reached, checking every 2 steps', async () => {
    const rs = await warmStart(() => 0, 0.5);
    expect(warmStartSteps(rs)).toBe(60);
    expect(checks(rs)).toEqual(Array.from({ length: 29 }, (_, i) => [2 * (i + 1), 0]));
  });

  it('null checks nothing', async () => {
    const rs = await warmStart(() => 1, null);
    expect(warmStartSteps(rs)).toBe(60);
    expect(checks(rs)).toEqual([]);
  });
});
