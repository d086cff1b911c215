import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { runBenchGpu, type BenchRow } from '../../bench/gpu.bench.js';

/**
 * `npm run bench:gpu --quick` in CI, so the one-command GPU benchmark never rots: every task runs at tiny sizes
 * on this machine's adapter (llvmpipe in CI), each timed result passes its check against the CPU backend (the
 * run throws otherwise), the table has a row per task, and without PyTorch with CUDA the peer is said to be
 * absent rather than crashing the run. Tuning is on (a cache dir of its own), so the tuned configurations are
 * printed. Timings are not asserted: they are the benchmark's output, not a property.
 */
async function adapterPresent(): Promise<boolean> {
  try {
    (await T.createWebGpuBackend({ tune: false })).dispose();
    return true;
  } catch (e) {
    if (e instanceof T.NoAdapterError && !process.env.CI) {
      console.log(`bench:gpu spec skipped: ${e.message}`);
      return false;
    }
    throw e;
  }
}
const present = await adapterPresent();
const cacheDir = mkdtempSync(join(tmpdir(), 'rlvr-bench-gpu-'));
afterAll(() => rmSync(cacheDir, { recursive: true, force: true }));

describe.skipIf(!present)('bench:gpu --quick', () => {
  it('runs every task, checked against the CPU backend, and prints one table', async () => {
    const lines: string[] = [];
    const rows: BenchRow[] = await runBenchGpu({
      quick: true,
      variants: ['default', 'submit-at-read', 'replayed'],
      backend: { tune: true, tuneCacheDir: cacheDir },
      log: (line) => lines.push(line),
    });
    const text = lines.join('\n');
    expect(rows.map((r) => r.task.split(' ')[0])).toEqual([
      'matmul',
      'matmul',
      'SFT',
      'SFT',
      'SFT',
      'SFT',
      'SFT',
      'SFT',
      'KV-cache',
      'LoRA',
      'LoRA',
    ]);
    // Each step under each configuration; `submit-at-read` submits once, at the step's read.
    const steps = rows.filter((r) => r.task.startsWith('SFT step'));
    expect(steps.map((r) => r.task.match(/ \[(.*)\]$/)?.[1] ?? 'default')).toEqual([
      'default',
      'submit-at-read',
      'replayed',
      'default',
      'submit-at-read',
      'replayed',
    ]);
    for (const r of steps.filter((row) => row.task.endsWith(' [submit-at-read]')))
      expect(r.counters).toMatch(/, 1 submits,/);
    // The replayed step (recordStep) encodes the op-by-op step's dispatches, no more and no fewer.
    const dispatches = (r: BenchRow) => Number(r.counters.match(/^(\d+) dispatches/)?.[1]);
    for (const i of [0, 3]) expect(dispatches(steps[i + 2]!), steps[i + 2]!.task).toBe(dispatches(steps[i]!));
    // Where the time goes: a timeline per step and configuration, one compute pass per submit, host times.
    for (const r of steps) {
      const at = lines.findIndex((l) => l.startsWith(`timeline ${r.task}: wall `));
      expect(at, r.task).toBeGreaterThan(0);
      // One pass per submit, replayed too (a recording's uploads keep their own buffers: nothing to put back).
      expect(lines[at]).toMatch(/ compute passes \(1\.00 per submit\), 1 read-back$/);
      expect(lines[at + 1]).toMatch(
        /^ {2}host: [\d.]+ ms until the last submit = JS [\d.]+ .* \(the longest [\d.]+\); per dispatch [\d.]+ us/,
      );
      expect(lines[at + 2]).toMatch(/^ {2}GPU: (busy|not measured \(the device has no timestamp-query\))/);
    }
    for (const r of rows) {
      expect(Number.isFinite(r.ours) && r.ours > 0, `${r.task}: ${r.ours} ${r.unit}`).toBe(true);
      expect(text).toContain(`| ${r.task} |`);
    }
    expect(text).toMatch(/^bench:gpu \| adapter: /m);
    expect(text).toMatch(/^features: /m);
    const peerLine = lines.find((l) => l.startsWith('PyTorch peer: '))!;
    if (peerLine.startsWith('PyTorch peer: absent')) expect(rows.every((r) => r.torch === null)).toBe(true);
    // The steps' counters (the LoRA step's too): one read-back each, at its end, each timed step's time, and no
    // buffer created or destroyed in the timed steps.
    for (const r of rows.filter((row) => row.unit === 'ms/step'))
      expect(r.counters, r.task).toMatch(
        / 1 read-back \(0 inside\) a step; steps [\d.]+, [\d.]+, [\d.]+ ms; 0 buffers created, 0 destroyed in them$/,
      );
    for (const r of rows.filter((row) => row.unit === 'tokens/s')) expect(r.counters).toBe('1.00 read-backs per token');
    // The LoRA step and rollout on the bf16 base, each checked against the CPU backend (a failed check would have
    // left its figure NaN above and its checked column saying so).
    const [loraStep, loraRollout] = rows.slice(-2) as [BenchRow, BenchRow];
    expect(loraStep.task).toMatch(/^LoRA SFT step .*bf16 base .*LoRA r16 alpha 32 all-linear/);
    expect(loraStep.unit).toBe('ms/step');
    expect(loraStep.checked).toMatch(/^loss and adapter gradient norm of a 1 x 16-token batch vs the CPU backend/);
    expect(loraRollout.task).toMatch(/^LoRA KV-cache sampling .*bf16 base .*, 16 rows x 8 new$/);
    expect(loraRollout.checked).toMatch(/^every sampled token's log-prob vs the CPU backend's scoring \(largest/);
    expect(text).toMatch(/^tuned configurations \(\d+ classes tuned in this run, [\d.]+ s; kernel/m);
    // Two rounds: the table after the first as well, every task in it with a figure.
    const interim = lines.indexOf('table after round 1 (medians so far):');
    expect(interim).toBeGreaterThan(0);
    for (const [i, r] of rows.entries())
      expect(lines[interim + 4 + i]).toMatch(new RegExp(`^\\| ${escapeRegExp(r.task)} \\| [\\d.]+ \\|`));
  }, 120_000);

  it('--seconds: no round starts after the time is spent, and the table holds the rounds run', async () => {
    const lines: string[] = [];
    const rows = await runBenchGpu({
      quick: true,
      rounds: 3,
      seconds: 1e-6,
      tasks: ['matmul'],
      peer: false,
      backend: { tune: false },
      log: (line) => lines.push(line),
    });
    expect(lines.filter((l) => l.startsWith('round '))).toEqual([expect.stringMatching(/^round 1\/3 done/)]);
    expect(lines).toContainEqual(
      expect.stringMatching(/^no more rounds: another \(\d+ s\) would end past --seconds 0\.000001 after round 1$/),
    );
    expect(rows.map((r) => Number.isFinite(r.ours) && r.ours > 0)).toEqual([true, true]);
  }, 60_000);
});

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
