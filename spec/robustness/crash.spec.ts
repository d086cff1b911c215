import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CheckpointError, train } from '../../src/index.js';
import { crashConfig, metricLines, task } from './helpers/crash-run.js';

/**
 * A kill at any moment (between any two writes of a checkpoint, or of metrics.jsonl) leaves
 * the previous checkpoint loadable, and the resumed run reproduces the uninterrupted one exactly on the CPU
 * backend: the same metrics.jsonl (no repeated or missing line; wall-clock fields aside) and the same bytes of
 * weights and AdamW moments in the final checkpoint.
 */
const fresh = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-crash-${name}-`));
const weights = (dir: string): Buffer[] =>
  ['model.safetensors', 'optimizer.safetensors'].map((f) => readFileSync(join(dir, 'checkpoint', f)));

/** Crash points and how often the run reaches each (6 checkpoints + the reference; 7 metric lines). */
const POINTS: readonly [string, number][] = [
  ['checkpoint:file', 27],
  ['checkpoint:files-written', 7],
  ['checkpoint:before-swap', 7],
  ['checkpoint:after-swap', 7],
  ['metrics:line', 7],
];

function runChild(
  dir: string,
  crashAt: string,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      join('node_modules', '.bin', 'vite-node'),
      ['--config', 'vitest.config.ts', join('spec', 'robustness', 'helpers', 'crash-child.ts')],
      {
        env: { ...process.env, CRASH_DIR: dir, RLVR_TEST_CRASH_AT: crashAt },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve({ code, signal, stderr }));
  });
}

/** Resume from the run's checkpoint; with none written yet, start again (the partial directory overwritten). */
async function resumeOrRestart(dir: string): Promise<void> {
  try {
    await train(crashConfig(dir, join(dir, 'checkpoint')), { task });
  } catch (e) {
    if (!(e instanceof CheckpointError && e.kind === 'io')) throw e;
    await train({ ...crashConfig(dir, null), overwrite: true }, { task });
  }
}

describe('crash safety: kill the training process anywhere, resume, get the same run', () => {
  let expected: { lines: string[]; weights: Buffer[] } | null = null;
  const uninterrupted = async (): Promise<{ lines: string[]; weights: Buffer[] }> => {
    if (!expected) {
      const dir = fresh('full');
      await train(crashConfig(dir, null), { task });
      expected = { lines: metricLines(dir), weights: weights(dir) };
    }
    return expected;
  };

  it('killed at random points (inside checkpoint saves and between metric lines), resumed exactly', async () => {
    const full = await uninterrupted();
    expect(full.lines).toHaveLength(7);
    // RLVR_CRASH_ALL=1 tries every point instead of a few random ones (about 3 s each; not for CI).
    const all = POINTS.flatMap(([point, count]) => Array.from({ length: count }, (_, i) => `${point}:${i + 1}`));
    const check = async (crashAt: string): Promise<void> => {
      const dir = fresh('killed');
      const child = await runChild(dir, crashAt);
      expect(child.signal, `${crashAt}: ${child.stderr}`).toBe('SIGKILL');
      await resumeOrRestart(dir);
      expect(metricLines(dir), crashAt).toEqual(full.lines);
      expect(weights(dir), crashAt).toEqual(full.weights);
    };
    if (process.env.RLVR_CRASH_ALL) {
      for (const crashAt of all) await check(crashAt);
      return;
    }
    const arb = fc
      .constantFrom(...POINTS)
      .chain(([point, count]) => fc.integer({ min: 1, max: count }).map((n) => `${point}:${n}`));
    await fc.assert(fc.asyncProperty(arb, check), { numRuns: 3, examples: [['checkpoint:file:14']] });
  }, 600_000);
});
