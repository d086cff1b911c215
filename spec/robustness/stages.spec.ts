import { afterEach, describe, expect, it, vi } from 'vitest';
import { createStages, markdownTable } from '../../src/cli/progress.js';
import { loraRealTable } from '../../bench/lib/lora-real-report.js';

/**
 * Long commands show their progress and end with a table (issue 38): `bench:lora-real` printed nothing for 6.5
 * minutes, then raw JSON lines.
 */
describe('stages of a long command', () => {
  afterEach(() => vi.useRealTimers());

  it('a line when each stage starts and ends, and one every heartbeat while it runs', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const lines: string[] = [];
    const stages = createStages(2, { tty: false, heartbeatSeconds: 30, log: (l) => lines.push(l) });
    stages.start('writing the model');
    vi.advanceTimersByTime(95_000);
    stages.done('1.2 GB');
    stages.start('round 1/1: ours');
    vi.advanceTimersByTime(20_000);
    stages.done();
    vi.advanceTimersByTime(120_000); // nothing runs: no heartbeat
    stages.stop();
    expect(lines).toEqual([
      '[1/2] writing the model ...',
      '[1/2] writing the model: running for 30 s',
      '[1/2] writing the model: running for 60 s',
      '[1/2] writing the model: running for 90 s',
      '[1/2] writing the model: done in 95 s (1.2 GB)',
      '[2/2] round 1/1: ours ...',
      '[2/2] round 1/1: ours: done in 20 s',
    ]);
  });
});

describe('closing tables', () => {
  it('markdownTable: a header, a rule (numbers right-aligned) and a row each', () => {
    expect(
      markdownTable(
        ['name', 'ms'],
        [
          ['a', 1.5],
          ['b', 2],
        ],
      ),
    ).toBe('| name | ms |\n|---|---:|\n| a | 1.5 |\n| b | 2 |');
  });

  it("bench:lora-real's table: each round, the ratios of minima and medians, peak RSS and the heap", () => {
    const GIB = 2 ** 30;
    const ours = [
      {
        sample_seconds: [60],
        update_seconds: [110],
        peak_rss_bytes: 2.5 * GIB,
        heap_bytes: 2.25 * GIB,
        estimate_bytes: 3 * GIB,
      },
      {
        sample_seconds: [58],
        update_seconds: [112],
        peak_rss_bytes: 2.4 * GIB,
        heap_bytes: 2.25 * GIB,
        estimate_bytes: 3 * GIB,
      },
    ];
    const torch = [
      { sample_seconds: [40], update_seconds: [40], peak_rss_bytes: 4.5 * GIB },
      { sample_seconds: [29], update_seconds: [56], peak_rss_bytes: 4.4 * GIB },
    ];
    const rows = loraRealTable(ours, torch).split('\n');
    expect(rows[0]).toBe('|  | ours (each round) | PyTorch (each round) | ratio min / median |');
    // min 58 / 29 = 2.00; median (upper of two) 60 / 40 = 1.50
    expect(rows[2]).toBe('| rollouts (s) | 60.0, 58.0 | 40.0, 29.0 | 2.00 / 1.50 |');
    expect(rows[3]).toBe('| update (s) | 110.0, 112.0 | 40.0, 56.0 | 2.75 / 2.00 |');
    expect(rows[4]).toBe('| whole step (s) | 170.0, 170.0 | 80.0, 85.0 | 2.13 / 2.00 |');
    expect(rows[5]).toBe('| peak RSS of the process | 2.50 GiB | 4.50 GiB |  |');
    expect(rows[6]).toBe('| CPU backend heap carved / memory estimate | 2.25 / 3.00 GiB |  |  |');
    expect(loraRealTable(ours, []).split('\n')[2]).toBe('| rollouts (s) | 60.0, 58.0 | not run | - |');
  });
});
