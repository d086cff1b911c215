import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { treeLeaves } from '../../src/core/pytree.js';
import { loadCheckpoint } from '../../src/nn/checkpoint.js';
import { MIN_TEMPERATURE, parseTrainConfig, type TrainConfig } from '../../src/training/config.js';
import { CpuBackend, defaultThreads, MAX_THREADS } from '../../src/backends/cpu/index.js';
import { BackendError } from '../../src/core/errors.js';
import { STATE_METRIC } from '../../src/training/divergence.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { TINY_RUN, tinyRun } from '../training/helpers/tiny-run.js';
import { cliBundle, rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';

/** Issue 26 ("Hardening, round 3"), items 1-4, through `train()` and the CLI. */
const TINY: Partial<TrainConfig> = { ...TINY_RUN, objective: 'grpo', warmStartSteps: 2, steps: 1 };
const cfgOf = (over: Partial<TrainConfig>): TrainConfig => tinyRun({ ...TINY, ...over });
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-r3a-${name}-`));
const errorOf = async (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => null,
    (e: unknown) => e,
  );

const bundle = cliBundle('round3-a');
beforeAll(bundle.build, 60_000);
afterAll(bundle.remove);

async function allFinite(checkpoint: string): Promise<boolean> {
  const ck = await loadCheckpoint(checkpoint, { allowNonFinite: true })();
  if (E.isLeft(ck)) throw ck.left;
  return treeLeaves(ck.right.params).every((t) => t.dataSync().every(Number.isFinite));
}

describe('1. an update that makes the weights non-finite is divergence, not a NaN model saved with exit 0', () => {
  it('learningRate 1e308: DivergedError at RL step 1 naming the updated state; no NaN weights saved', async () => {
    const dir = tmp('nan-model');
    const e = await errorOf(train(cfgOf({ learningRate: 1e308, outputDir: dir })));
    expect(e).toMatchObject({ name: 'DivergedError', phase: 'rl', step: 1, metric: STATE_METRIC });
    const ck = join(dir, 'checkpoint');
    if (existsSync(ck)) expect(await allFinite(ck)).toBe(true);
  });

  it("with onNonFinite 'skip' the update is dropped and recorded; the run ends with finite weights", async () => {
    const records: MetricRecord[] = [];
    const dir = tmp('nan-skip');
    const result = await train(cfgOf({ learningRate: 1e308, onNonFinite: 'skip', outputDir: dir }), {
      onRecord: (r) => records.push(r),
    });
    const rl = records.filter((r) => r.phase === 'rl');
    expect(rl).toHaveLength(1);
    expect(rl[0]!.skipped).toMatch(new RegExp(`^${STATE_METRIC} = (NaN|-?Infinity)$`));
    for (const t of treeLeaves(result.params)) expect(t.dataSync().every(Number.isFinite)).toBe(true);
    expect(await allFinite(join(dir, 'checkpoint'))).toBe(true);
  });

  it('under LoRA the adapters (what the update wrote) are checked', async () => {
    const e = await errorOf(train(cfgOf({ learningRate: 1e308, lora: { ...loraOf() } })));
    expect(e).toMatchObject({ name: 'DivergedError', phase: 'rl', step: 1, metric: STATE_METRIC });
  });

  it('the check only reads: no record carries it, and a sound run is unchanged by it', async () => {
    const records: MetricRecord[] = [];
    await train(cfgOf({ steps: 2 }), { onRecord: (r) => records.push(r) });
    expect(records.some((r) => r.phase === 'rl')).toBe(true);
    for (const r of records) {
      expect(r).not.toHaveProperty(STATE_METRIC);
      expect(r).not.toHaveProperty('skipped');
    }
  });

  it('the CLI exits 4 (diverged) for --learning-rate 1e308, where it exited 0 with a NaN checkpoint', () => {
    const dir = join(tmp('nan-cli'), 'out');
    const r = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, { '--learning-rate': '1e308' }), '--output', dir]);
    expect(r.status).toBe(4);
    expect(r.stderr).toMatch(/training diverged: updated_state_sum_sq = NaN at rl step 1/);
  });
});

describe('2. a thread count past MAX_THREADS (256) is refused, not spawned until memory runs out', () => {
  it('threads: the config names the field and the bound; 256 is accepted', () => {
    const bad = parseTrainConfig({ threads: 1e9 });
    expect(E.isLeft(bad) && bad.left).toMatchObject({ name: 'TrainConfigError', field: 'threads' });
    expect(E.isLeft(bad) && bad.left.message).toMatch(/1\.\.256/);
    expect(E.isRight(parseTrainConfig({ threads: MAX_THREADS }))).toBe(true);
  });

  it('RLVR_THREADS and the CpuBackend constructor refuse it before starting a worker', () => {
    const was = process.env.RLVR_THREADS;
    try {
      process.env.RLVR_THREADS = '1e9';
      expect(() => defaultThreads()).toThrow(/RLVR_THREADS must be a whole number in 1\.\.256, got '1e9'/);
      process.env.RLVR_THREADS = '256';
      expect(defaultThreads()).toBe(256);
    } finally {
      if (was === undefined) delete process.env.RLVR_THREADS;
      else process.env.RLVR_THREADS = was;
    }
    expect(() => new CpuBackend({ threads: 1e9 })).toThrow(BackendError);
  });

  it('the CLI exits 2 with one line naming --threads or RLVR_THREADS', () => {
    // 257, not 1e9: were the bound lost, this spec would start 257 workers, not exhaust the machine.
    const flag = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, { '--threads': '257' })]);
    expect(flag.status).toBe(2);
    expect(flag.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/threads = 257 must be an integer in 1\.\.256/),
    ]);
    const env = rlvrSync(bundle.path, ['train', ...TINY_ARGS], { RLVR_THREADS: '257' });
    expect(env.status).toBe(2);
    expect(env.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/RLVR_THREADS must be a whole number in 1\.\.256/),
    ]);
  });
});

describe('3. a temperature whose scaled logits overflow f32 is a usage error, not "training diverged"', () => {
  it('temperature below MIN_TEMPERATURE (1e-4) is refused, naming the field; 1e-4 is accepted', () => {
    for (const t of [1e-300, 1e-5]) {
      const bad = parseTrainConfig({ temperature: t });
      expect(E.isLeft(bad) && bad.left).toMatchObject({ name: 'TrainConfigError', field: 'temperature' });
    }
    expect(E.isRight(parseTrainConfig({ temperature: MIN_TEMPERATURE }))).toBe(true);
  });

  it('the CLI exits 2 for --temperature 1e-300 (it exited 4, "training diverged")', () => {
    const r = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, { '--temperature': '1e-300' })]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/temperature = 1e-300 must be >= 0\.0001/)]);
  });

  it('the extremes that work are still accepted: --top-p 1e-300 and --temperature 1e-4 train to the end', () => {
    const extremes: Record<string, string>[] = [{ '--top-p': '1e-300' }, { '--temperature': '1e-4' }];
    for (const over of extremes) {
      const r = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, over)]);
      expect(r.status, r.stderr).toBe(0);
    }
  });
});

function loraOf(): NonNullable<TrainConfig['lora']> {
  return { r: 2, alpha: 4, dropout: 0, targetModules: ['q_proj', 'v_proj'], useRslora: false };
}
