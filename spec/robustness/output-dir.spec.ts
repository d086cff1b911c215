import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { additionTask, withReward } from '../../src/tasks/index.js';
import type { TrainConfig } from '../../src/training/config.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { OutputDirError } from '../../src/training/output-dir.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * `--overwrite` never deletes what the run reads. A --model, --dataset or --resume inside the
 * --output it would empty, an --output that is a symbolic link (its target would be emptied), and a directory
 * holding anything a run does not write are refused (usage, exit 2) before anything is deleted.
 */
const task = withReward(additionTask(), (completion) => completion.length % 2);
const SMALL: Partial<TrainConfig> = { warmStartSteps: 1, steps: 1, checkpointEvery: 1, objective: 'grpo' };
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-out-${name}-`));
/** A directory holding a previous run (metrics.jsonl, checkpoint generations, reference). */
async function previousRun(dir: string): Promise<void> {
  await train(tinyRun({ ...SMALL, outputDir: dir }), { task });
}
const refused = async (cfg: TrainConfig, taskOverride = true): Promise<OutputDirError> => {
  const records: MetricRecord[] = [];
  const e = await train(cfg, {
    ...(taskOverride ? { task } : {}),
    backend: new CpuBackend(),
    onRecord: (r) => records.push(r),
  }).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(OutputDirError);
  expect(describeFailure(e).code).toBe(EXIT.usage);
  expect(records).toEqual([]);
  return e as OutputDirError;
};

describe("--overwrite does not delete the run's own inputs", () => {
  it('--model DIR/base --output DIR --overwrite is refused and the model kept (it deleted the model)', async () => {
    const out = tmp('model');
    await previousRun(out);
    const model = join(out, 'base');
    mkdirSync(model);
    await tinyHubDir({ parent: model });
    const before = readdirSync(model).sort();
    const cfg = tinyRun({ ...SMALL, modelDir: model, outputDir: out, overwrite: true, maxCompletionLength: 4 });
    const e = await refused(cfg, false);
    expect(e.message).toMatch(/--model/);
    expect(readdirSync(model).sort()).toEqual(before);
  });

  it("a previous run's exported model (OUTPUT/model) is an input too", async () => {
    const out = tmp('export');
    await previousRun(out);
    const model = join(out, 'model');
    mkdirSync(model);
    await tinyHubDir({ parent: model });
    const cfg = tinyRun({ ...SMALL, modelDir: model, outputDir: out, overwrite: true, maxCompletionLength: 4 });
    expect((await refused(cfg, false)).message).toMatch(/--model/);
    expect(existsSync(join(model, 'model.safetensors'))).toBe(true);
  });

  it('a --dataset inside --output is refused and kept (it was deleted and the run exited 0)', async () => {
    const out = tmp('dataset');
    await previousRun(out);
    const data = join(out, 'data.jsonl');
    const rows = Array.from({ length: 30 }, (_, i) => JSON.stringify({ prompt: `${i}+1=`, answer: i + 1 }));
    writeFileSync(data, `${rows.join('\n')}\n`);
    const e = await refused(tinyRun({ ...SMALL, dataset: data, outputDir: out, overwrite: true }), false);
    expect(e.message).toMatch(/--dataset/);
    expect(readFileSync(data, 'utf8').split('\n')).toHaveLength(31);
  });

  it('--resume DIR/old/checkpoint --output DIR --overwrite is refused and the old run kept (it was deleted)', async () => {
    const out = tmp('resume');
    await previousRun(join(out, 'old'));
    const cfg = tinyRun({
      ...SMALL,
      steps: 2,
      resume: join(out, 'old', 'checkpoint'),
      outputDir: out,
      overwrite: true,
    });
    expect((await refused(cfg)).message).toMatch(/--resume/);
    expect(existsSync(join(out, 'old', 'checkpoint', 'model.safetensors'))).toBe(true);
  });

  it('--overwrite on a symbolic link is refused and its target kept (it emptied the target)', async () => {
    const target = tmp('target');
    await previousRun(target);
    const link = join(tmp('link'), 'run');
    symlinkSync(target, link);
    const before = readdirSync(target).sort();
    expect((await refused(tinyRun({ ...SMALL, outputDir: link, overwrite: true }))).message).toMatch(/symbolic link/);
    expect(readdirSync(target).sort()).toEqual(before);
  });

  it('--overwrite of a directory holding anything a run does not write is refused (a wrong --output)', async () => {
    const out = tmp('foreign');
    await previousRun(out);
    writeFileSync(join(out, 'notes.txt'), 'mine');
    expect((await refused(tinyRun({ ...SMALL, outputDir: out, overwrite: true }))).message).toMatch(/notes\.txt/);
    expect(readFileSync(join(out, 'notes.txt'), 'utf8')).toBe('mine');
  });

  it('--overwrite of a previous run directory still replaces it', async () => {
    const out = tmp('again');
    await previousRun(out);
    const before = readFileSync(join(out, 'metrics.jsonl'), 'utf8');
    await train(tinyRun({ ...SMALL, seed: 9, outputDir: out, overwrite: true }), { task });
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).not.toBe(before);
    expect(existsSync(join(out, 'checkpoint', 'model.safetensors'))).toBe(true);
  });
});

/**
 * One run at a time per output directory. A run takes an exclusive lock (OUTPUT/.rlvr-lock,
 * created with O_EXCL, holding its pid and host) before it deletes or writes anything there, and releases it when
 * it ends, however it ends; a lock left by a dead process is recovered.
 */
describe('an exclusive lock on the output directory', () => {
  const LOCK = '.rlvr-lock';
  it('a second run on the same --output while the first runs is refused; the first finishes alone', async () => {
    const out = join(tmp('lock'), 'run');
    let second: Promise<unknown> | null = null;
    const first = train(tinyRun({ ...SMALL, warmStartSteps: 2, outputDir: out }), {
      task,
      onRecord: () => {
        // Started once the first holds the directory (its first record), as a second `rlvr train` would be.
        second ??= train(tinyRun({ ...SMALL, outputDir: out, overwrite: true }), { task }).then(
          () => null,
          (e: unknown) => e,
        );
      },
    });
    await first;
    const e: unknown = await (second as Promise<unknown> | null);
    expect(e).toBeInstanceOf(OutputDirError);
    expect((e as Error).message).toMatch(new RegExp(`in use by process ${process.pid}.*${LOCK}`));
    expect(describeFailure(e).code).toBe(EXIT.usage);
    const lines = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(new Set(lines).size).toBe(lines.length);
    expect(lines.map((l) => JSON.parse(l).phase)).toEqual(['warmstart', 'warmstart', 'eval', 'rl', 'eval']);
    expect(existsSync(join(out, LOCK))).toBe(false); // released at the end
  });

  it("a lock held by another live process is refused naming its pid; a dead process's lock is recovered", async () => {
    const { spawn } = await import('node:child_process');
    const out = tmp('held');
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    try {
      writeFileSync(join(out, LOCK), JSON.stringify({ pid: sleeper.pid, host: (await import('node:os')).hostname() }));
      const e = await refused(tinyRun({ ...SMALL, outputDir: out }));
      expect(e.message).toMatch(new RegExp(`in use by process ${sleeper.pid}`));
      expect(existsSync(join(out, LOCK))).toBe(true); // not ours to remove
    } finally {
      sleeper.kill('SIGKILL');
      await new Promise((resolve) => sleeper.once('exit', resolve));
    }
    // The sleeper is dead now: its lock is stale, and the next run takes the directory.
    await train(tinyRun({ ...SMALL, outputDir: out }), { task });
    expect(readdirSync(out)).toContain('metrics.jsonl');
    expect(existsSync(join(out, LOCK))).toBe(false);
  });

  it('a run that fails or is refused releases its lock', async () => {
    const out = tmp('fail');
    const e = await train(tinyRun({ ...SMALL, warmStartLearningRate: 1e10, warmStartSteps: 4, outputDir: out }), {
      task,
    }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toMatchObject({ name: 'DivergedError' });
    expect(existsSync(join(out, LOCK))).toBe(false);
    await refused(tinyRun({ ...SMALL, outputDir: out })); // non-empty, no --overwrite
    expect(existsSync(join(out, LOCK))).toBe(false);
  });
});
