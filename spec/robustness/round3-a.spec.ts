import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
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
import { ResumeMismatchError } from '../../src/training/resume-check.js';
import { parseTrainerState } from '../../src/training/trainer-state.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
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

describe('4. a resume on another dataset is a task mismatch, not a run that silently changes its data', () => {
  const row = (prompt: string, answer: number): string => JSON.stringify({ prompt, answer });
  const rows = (shift: number): string =>
    `${Array.from({ length: 40 }, (_, i) => row(`${i}+${(i + shift) % 7}=`, i + ((i + shift) % 7))).join('\n')}\n`;
  const write = (dir: string, name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const SMALL: Partial<TrainConfig> = { warmStartSteps: 2, steps: 1, objective: 'grpo' };
  const dataRun = (over: Partial<TrainConfig>): TrainConfig => tinyRun({ ...SMALL, ...over });

  it('the checkpoint records the path and SHA-256; other rows are refused, the same rows elsewhere resume', async () => {
    const dir = tmp('dataset');
    const a = write(dir, 'a.jsonl', rows(0));
    const b = write(dir, 'b.jsonl', rows(3));
    const out = join(dir, 'R');
    await train(dataRun({ dataset: a, outputDir: out }));
    const ck = await loadCheckpoint(join(out, 'checkpoint'))();
    if (E.isLeft(ck)) throw ck.left;
    const sha256 = createHash('sha256').update(rows(0)).digest('hex');
    expect(ck.right.trainerState).toMatchObject({ identity: { dataset: { path: a, sha256 } } });

    const resume = (over: Partial<TrainConfig>, name: string) =>
      errorOf(train(dataRun({ steps: 2, resume: join(out, 'checkpoint'), outputDir: join(dir, name), ...over })));
    const other = await resume({ dataset: b }, 'other');
    expect(other).toBeInstanceOf(ResumeMismatchError);
    expect(other).toMatchObject({ field: 'dataset', checkpointValue: { path: a, sha256 } });
    expect(describeFailure(other).code).toBe(EXIT.usage);
    // A built-in task is no dataset: refused too (here its vocabulary already differs).
    expect(await resume({}, 'builtin')).toBeInstanceOf(ResumeMismatchError);
    // The same rows under another path are the same dataset.
    expect(await resume({ dataset: write(dir, 'moved.jsonl', rows(0)) }, 'moved')).toBeNull();
  });

  it('the CLI exits 2 naming the dataset (it exited 0)', async () => {
    const dir = tmp('dataset-cli');
    const a = write(dir, 'a.jsonl', rows(0));
    const b = write(dir, 'b.jsonl', rows(3));
    const args = withArgs(TINY_ARGS, { '--objective': 'grpo' });
    expect(rlvrSync(bundle.path, ['train', ...args, '--dataset', a, '--output', join(dir, 'R')]).status).toBe(0);
    const r = rlvrSync(bundle.path, [
      'train',
      ...withArgs(args, { '--steps': '2' }),
      ...['--dataset', b, '--resume', join(dir, 'R', 'checkpoint'), '--output', join(dir, 'R2')],
    ]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/resume: dataset differs/)]);
  });

  it('a checkpoint written before datasets were recorded still loads: no dataset field reads as null', async () => {
    const out = join(tmp('old-state'), 'R');
    await train(cfgOf({ outputDir: out }));
    const ck = await loadCheckpoint(join(out, 'checkpoint'))();
    if (E.isLeft(ck)) throw ck.left;
    const state = structuredClone(ck.right.trainerState) as { identity: Record<string, unknown> };
    expect(state.identity.dataset).toBeNull();
    delete state.identity.dataset;
    const parsed = parseTrainerState(state);
    expect(E.isRight(parsed) && parsed.right.identity.dataset).toBeNull();
    // A dataset field of the wrong shape is damage, named.
    const bad = parseTrainerState({ ...state, identity: { ...state.identity, dataset: { path: 'a', sha256: 'x' } } });
    expect(E.isLeft(bad) && bad.left.message).toMatch(/trainerState\.identity\.dataset\.sha256/);
  });
});

function loraOf(): NonNullable<TrainConfig['lora']> {
  return { r: 2, alpha: 4, dropout: 0, targetModules: ['q_proj', 'v_proj'], useRslora: false };
}
