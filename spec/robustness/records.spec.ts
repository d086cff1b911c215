import { describe, expect, it } from 'vitest';
import { additionTask, withReward } from '../../src/tasks/index.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { DEFAULT_KEEP_RECORDS, train } from '../../src/training/trainer.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * A run kept every metric record in memory (about 0.5 KB a step, without end). `result.records`
 * now holds the last `keepRecords` (default DEFAULT_KEEP_RECORDS); the whole history is metrics.jsonl's and
 * `onRecord`'s.
 */
const task = withReward(additionTask(), (completion) => completion.length % 2);

describe('run.records is bounded', () => {
  it('keeps the last keepRecords records, the newest last, as onRecord saw them', async () => {
    const seen: MetricRecord[] = [];
    const result = await train(tinyRun({ warmStartSteps: 12, steps: 3, objective: 'grpo' }), {
      task,
      keepRecords: 4,
      onRecord: (r) => seen.push(r),
    });
    expect(seen.length).toBeGreaterThan(8);
    expect(result.records).toEqual(seen.slice(-4));
  });

  it('the default bound is finite, and a short run keeps everything', async () => {
    expect(Number.isSafeInteger(DEFAULT_KEEP_RECORDS) && DEFAULT_KEEP_RECORDS >= 1000).toBe(true);
    const seen: MetricRecord[] = [];
    const result = await train(tinyRun({ warmStartSteps: 2, steps: 1 }), { task, onRecord: (r) => seen.push(r) });
    expect(result.records).toEqual(seen);
  });
});
