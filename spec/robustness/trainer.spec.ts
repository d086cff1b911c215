import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { dispose } from '../../src/core/scope.js';
import { tensor } from '../../src/ops/creation.js';
import { MemoryError } from '../../src/training/memory.js';
import { loadCheckpoint, saveCheckpoint } from '../../src/io/checkpoint.js';
import { adamwInit } from '../../src/nn/optim.js';
import { initParams } from '../../src/nn/transformer.js';
import { TrainConfigError, type TrainConfig } from '../../src/training/config.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { additionTask, withReward } from '../../src/tasks/index.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';
import { metricLines } from './helpers/crash-run.js';
import { TINY_RUN, tinyRun } from '../training/helpers/tiny-run.js';

/**
 * Whole checkpoints, resume checks, divergence, the output directory and size bounds, each through the trainer as
 * a library user (or the CLI, through train()) meets it.
 */
const TINY: Partial<TrainConfig> = { ...TINY_RUN, warmStartSteps: 2, steps: 2 };
const cfgOf = (over: Partial<TrainConfig>): TrainConfig => tinyRun({ ...TINY, ...over });
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-rob-${name}-`));
const task = withReward(additionTask(), (completion) => completion.length % 2);
const errorOf = async (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => null,
    (e: unknown) => e,
  );

describe('1. a checkpoint is whole or absent; metrics.jsonl follows it', () => {
  it('a save that fails part-way leaves the previous checkpoint whole (it mixed new weights with old state)', async () => {
    const config = tinyConfig();
    const dir = join(tmp('partial'), 'checkpoint');
    const a = initParams(config, new Rng(1));
    expect(
      E.isRight(await saveCheckpoint(dir, { config, params: a, optimizer: adamwInit(a), trainerState: { step: 1 } })()),
    ).toBe(true);
    const b = initParams(config, new Rng(2));
    const broken = adamwInit(b);
    dispose(broken.v); // reading the moments fails after the weights were encoded
    const failed = await saveCheckpoint(dir, { config, params: b, optimizer: broken, trainerState: { step: 2 } })();
    expect(E.isLeft(failed)).toBe(true);
    const loaded = await loadCheckpoint(dir)();
    if (E.isLeft(loaded)) throw loaded.left;
    expect(loaded.right.trainerState).toEqual({ step: 1 });
    const [wa, wl] = [treeLeaves(a), treeLeaves(loaded.right.params)];
    for (let i = 0; i < wa.length; i++) expect(wl[i]!.dataSync()).toEqual(wa[i]!.dataSync());
  });

  it('resumed in its own directory after an interruption, metrics.jsonl has each line once (lines repeated)', async () => {
    const base = { objective: 'grpo' as const, steps: 3, checkpointEvery: 2 };
    const full = tmp('full');
    await train(cfgOf({ ...base, outputDir: full }), { task });
    const dir = tmp('cut');
    const killed = await errorOf(
      train(cfgOf({ ...base, outputDir: dir }), {
        task,
        onRecord: (r) => {
          if (r.phase === 'rl' && r.step === 3) throw new Error('killed');
        },
      }),
    );
    expect(String(killed)).toMatch(/killed/);
    await train(cfgOf({ ...base, outputDir: dir, resume: join(dir, 'checkpoint') }), { task });
    expect(metricLines(dir)).toEqual(metricLines(full));
    // resuming the finished run neither evaluates again nor adds a line
    await train(cfgOf({ ...base, outputDir: dir, resume: join(dir, 'checkpoint') }), { task });
    expect(metricLines(dir)).toEqual(metricLines(full));
  });
});

describe('2. resume compares the model config, the task and the objective with the command', () => {
  const original = { objective: 'grpo' as const, steps: 1 };
  let dir: string | null = null;
  const checkpoint = async (): Promise<string> => {
    if (!dir) {
      dir = tmp('resume');
      await train(cfgOf({ ...original, outputDir: dir }), { task });
    }
    return join(dir, 'checkpoint');
  };
  const cases: [string, Partial<TrainConfig>, unknown, unknown][] = [
    ['model.dModel', { model: { ...TINY.model!, dModel: 32 } }, 16, 32],
    ['model.nKvHeads', { model: { ...TINY.model!, nKvHeads: 2 } }, 1, 2],
    ['model.nLayers', { model: { ...TINY.model!, nLayers: 2 } }, 1, 2],
    ['model.nHeads', { model: { ...TINY.model!, nHeads: 4, nKvHeads: 1 } }, 2, 4],
    ['task', { task: 'countdown' }, 'addition', 'countdown'],
    ['objective', { objective: 'cispo' }, 'grpo', 'cispo'],
  ];
  for (const [field, change, saved, asked] of cases) {
    it(`${field}: a mismatch is a typed error with both values`, async () => {
      const from = await checkpoint();
      const e = await errorOf(train(cfgOf({ ...original, steps: 2, ...change, resume: from })));
      expect(e).toMatchObject({ name: 'ResumeMismatchError', field: expect.stringContaining(field.split('.')[0]!) });
      if (field !== 'task') expect(e).toMatchObject({ field, checkpointValue: saved, commandValue: asked });
    });
  }

  it('a warm-start checkpoint serves any objective (nothing objective-specific happened yet)', async () => {
    const warm = tmp('warm');
    await train(cfgOf({ ...original, steps: 0, outputDir: warm }), { task });
    const records: MetricRecord[] = [];
    await train(cfgOf({ objective: 'conspo', steps: 1, resume: join(warm, 'checkpoint') }), {
      task,
      onRecord: (r) => records.push(r),
    });
    expect(records.filter((r) => r.phase === 'rl')).toHaveLength(1);
  });
});

describe('3. a diverged run stops, keeps the last good checkpoint and says where', () => {
  it('a NaN loss ends the run with DivergedError (step, metric); the checkpoint is the last finite one', async () => {
    const dir = tmp('diverge');
    const e = await errorOf(
      train(cfgOf({ warmStartSteps: 4, steps: 1, warmStartLearningRate: 1e10, checkpointEvery: 1, outputDir: dir }), {
        task,
      }),
    );
    expect(e).toMatchObject({
      name: 'DivergedError',
      phase: 'warmstart',
      metric: expect.stringMatching(/loss|grad_norm/),
    });
    const step = (e as { step: number }).step;
    expect(step).toBeGreaterThan(1);
    const ck = await loadCheckpoint(join(dir, 'checkpoint'))();
    if (E.isLeft(ck)) throw ck.left;
    expect(ck.right.trainerState).toMatchObject({ phase: 'warmstart', step: step - 1 });
    for (const t of treeLeaves(ck.right.params)) expect(t.dataSync().every(Number.isFinite)).toBe(true);
  });

  it("with onNonFinite 'skip' the bad updates are dropped and recorded, and the run finishes", async () => {
    const records: MetricRecord[] = [];
    const result = await train(
      cfgOf({ warmStartSteps: 4, steps: 1, warmStartLearningRate: 1e10, onNonFinite: 'skip' }),
      { task, onRecord: (r) => records.push(r) },
    );
    expect(records.some((r) => typeof r.skipped === 'string')).toBe(true);
    for (const t of treeLeaves(result.params)) expect(t.dataSync().every(Number.isFinite)).toBe(true);
  });

  it('loading refuses non-finite weights unless allowNonFinite', async () => {
    const config = tinyConfig();
    const dir = join(tmp('nan'), 'checkpoint');
    const params = initParams(config, new Rng(1));
    const values = params.finalNorm.dataSync().slice();
    values[1] = Number.NaN;
    const bad = { ...params, finalNorm: tensor(values, params.finalNorm.shape) };
    expect(E.isRight(await saveCheckpoint(dir, { config, params: bad })())).toBe(true);
    const refused = await loadCheckpoint(dir)();
    expect(E.isLeft(refused) && refused.left.kind).toBe('non-finite');
    expect(E.isRight(await loadCheckpoint(dir, { allowNonFinite: true })())).toBe(true);
  });
});

describe('4. the output directory is checked before the run', () => {
  it('an existing file, a non-empty directory, a checkpoint that is a file: one typed error naming the path', async () => {
    const root = tmp('out');
    const file = join(root, 'file');
    writeFileSync(file, 'x');
    const started: MetricRecord[] = [];
    const hooks = { task, onRecord: (r: MetricRecord) => started.push(r) };
    expect(await errorOf(train(cfgOf({ outputDir: file }), hooks))).toMatchObject({
      name: 'OutputDirError',
      path: file,
    });
    const nested = join(file, 'run');
    expect(await errorOf(train(cfgOf({ outputDir: nested }), hooks))).toMatchObject({ name: 'FileSystemError' });
    const used = join(root, 'used');
    mkdirSync(used);
    writeFileSync(join(used, 'metrics.jsonl'), '{"phase":"rl","step":1}\n');
    expect(await errorOf(train(cfgOf({ outputDir: used }), hooks))).toMatchObject({
      name: 'OutputDirError',
      path: used,
    });
    expect(readFileSync(join(used, 'metrics.jsonl'), 'utf8')).toBe('{"phase":"rl","step":1}\n');
    const ckFile = join(root, 'ckfile');
    mkdirSync(ckFile);
    writeFileSync(join(ckFile, 'checkpoint'), 'not a directory');
    expect(await errorOf(train(cfgOf({ outputDir: ckFile, overwrite: false }), hooks))).toMatchObject({
      name: 'OutputDirError',
    });
    expect(started).toEqual([]); // every refusal came before the first step
    await train(cfgOf({ outputDir: used, overwrite: true, warmStartSteps: 1, steps: 0 }), { task });
    expect(readFileSync(join(used, 'metrics.jsonl'), 'utf8')).not.toContain('"phase":"rl","step":1}');
    expect(existsSync(join(used, 'checkpoint'))).toBe(true);
  });
});

describe('5. sizes are bounded before anything is allocated', () => {
  const refused = async (over: Partial<TrainConfig>): Promise<TrainConfigError> => {
    const started: MetricRecord[] = [];
    const e = await errorOf(train(cfgOf(over), { task, onRecord: (r) => started.push(r) }));
    expect(started).toEqual([]);
    expect(e).toBeInstanceOf(TrainConfigError);
    return e as TrainConfigError;
  };
  it('limits per size, and a memory estimate in the message', async () => {
    expect((await refused({ model: { ...TINY.model!, dModel: 1_000_000 } })).field).toBe('model.dModel');
    expect((await refused({ model: { ...TINY.model!, nLayers: 1e8 } })).field).toBe('model.nLayers');
    expect((await refused({ evalPrompts: 1e9 })).field).toBe('evalPrompts');
    const started: MetricRecord[] = [];
    const big = cfgOf({
      model: { dModel: 16_384, nLayers: 512, nHeads: 8, nKvHeads: 8, dFf: 65_536, maxSeqLen: 4096 },
    });
    const e = await errorOf(train(big, { task, onRecord: (r) => started.push(r) }));
    expect(started).toEqual([]);
    expect(e).toBeInstanceOf(MemoryError);
    expect((e as MemoryError).message).toMatch(/would not fit: [\d.]+ GiB needed.*\([\d.]+M parameters\)/);
  });
  it('--max-completion-length that cannot fit is refused before the warm-start runs', async () => {
    expect((await refused({ maxCompletionLength: 100, warmStartSteps: 3 })).field).toBe('maxCompletionLength');
  });
});
