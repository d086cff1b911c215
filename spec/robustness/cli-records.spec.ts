import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TrainOptions } from '../../src/training/trainer.js';

/**
 * 10,000 RL steps of a tiny `rlvr train --checkpoint-every 1` grew RSS from 122 MB to 135 MB.
 * The CLI kept the default DEFAULT_KEEP_RECORDS metric records in memory (about 0.5 KB a step, trimmed only past
 * twice the bound) that it never reads; with `keepRecords: 0` the JS heap after gc stays flat (bench/long-run-memory.ts).
 */
const calls: TrainOptions[] = [];
vi.mock('../../src/training/trainer.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/training/trainer.js')>();
  return {
    ...real,
    train: async (_cfg: unknown, opts: TrainOptions) => {
      calls.push(opts);
      return { final: { prompts: 1, passAt1: 0 }, warmStart: null, records: [] };
    },
  };
});

const argv = process.argv;
const exitCode = process.exitCode;
afterEach(() => {
  process.argv = argv;
  process.exitCode = exitCode;
});

describe('the CLI keeps no metric records in memory', () => {
  it('passes keepRecords: 0 to train', async () => {
    process.argv = [argv[0]!, 'main.js', 'train', '--steps', '1', '--warm-start-steps', '1'];
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    try {
      await import('../../src/cli/main.js');
    } finally {
      log.mockRestore();
    }
    expect(process.exitCode).toBe(0);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.keepRecords).toBe(0);
  });
});
