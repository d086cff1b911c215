import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { MANIFEST } from '../../src/io/atomic-dir.js';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint } from '../../src/io/checkpoint.js';
import { adamwInit } from '../../src/nn/optim.js';
import { initParams } from '../../src/nn/transformer.js';
import { sha256Hex } from '../../src/platform/host.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { CheckpointError, decodeSafetensors, encodeSafetensors } from '../../src/io/safetensors.js';
import { additionTask, withReward } from '../../src/tasks/index.js';
import { TrainConfigError, type TrainConfig } from '../../src/training/config.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { tinyRun } from '../training/helpers/tiny-run.js';
import { resealManifest } from './helpers/manifest.js';

/**
 * The manifest cannot be bypassed. A checkpoint whose manifest is emptied, deleted, of an
 * unknown format, or silent about a file the directory holds is damaged (kind 'corrupt', exit 3), so a flipped
 * byte in model.safetensors is always caught.
 */
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-trust-${name}-`));

async function checkpoint(): Promise<string> {
  const config = tinyConfig();
  const params = initParams(config, new Rng(1));
  const dir = join(tmp('ck'), 'checkpoint');
  const saved = await saveCheckpoint(dir, {
    config,
    params,
    optimizer: adamwInit(params),
    rngs: { train: new Rng(2).state() },
    trainerState: { step: 1 },
  })();
  if (E.isLeft(saved)) throw saved.left;
  return dir;
}

/** Flip a low mantissa bit of the last f32 of model.safetensors: still a valid, finite file, other weights. */
function flipModelByte(dir: string): void {
  const path = join(dir, CHECKPOINT_FILES.model);
  const bytes = readFileSync(path);
  bytes[bytes.length - 4]! ^= 0x01;
  writeFileSync(path, bytes);
}

type ManifestJson = { format: string; files: Record<string, { size: number; sha256: string }> };
const readManifest = (dir: string): ManifestJson => JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8'));
const writeManifest = (dir: string, m: unknown): void => writeFileSync(join(dir, MANIFEST), JSON.stringify(m));

async function refusal(dir: string): Promise<{ kind: string; field: string; message: string }> {
  const r = await loadCheckpoint(dir)();
  if (E.isRight(r)) throw new Error('the damaged checkpoint loaded');
  return r.left;
}

describe('the manifest cannot be bypassed', () => {
  const cases: [string, (dir: string) => void][] = [
    ['emptied (0 bytes)', (dir) => writeFileSync(join(dir, MANIFEST), '')],
    ['emptied ({})', (dir) => writeManifest(dir, {})],
    ['with no files', (dir) => writeManifest(dir, { ...readManifest(dir), files: {} })],
    ['deleted', (dir) => rmSync(join(dir, MANIFEST))],
    [
      "missing the model's entry",
      (dir) => {
        const m = readManifest(dir);
        delete m.files[CHECKPOINT_FILES.model];
        writeManifest(dir, m);
      },
    ],
  ];
  for (const [what, damage] of cases) {
    it(`a manifest ${what} with a flipped byte in model.safetensors is refused as corrupt (it loaded)`, async () => {
      const dir = await checkpoint();
      expect(E.isRight(await loadCheckpoint(dir)())).toBe(true);
      flipModelByte(dir);
      damage(dir);
      const e = await refusal(dir);
      expect(e.kind).toBe('corrupt');
      expect(e.message).toMatch(/manifest\.json|model\.safetensors/);
    });
  }

  it('an unknown manifest format is corrupt, even when every hash agrees', async () => {
    const dir = await checkpoint();
    writeManifest(dir, { ...readManifest(dir), format: 'rlvr-wgpu/manifest-99' });
    expect(await refusal(dir)).toMatchObject({ kind: 'corrupt', field: expect.stringContaining(MANIFEST) });
  });

  it('a file the manifest does not list is corrupt (its hash was never checked)', async () => {
    const dir = await checkpoint();
    writeFileSync(join(dir, 'extra.safetensors'), 'x');
    const e = await refusal(dir);
    expect(e).toMatchObject({ kind: 'corrupt', field: expect.stringContaining('extra.safetensors') });
    expect(e.message).toMatch(/not listed/);
  });

  it('an unknown trainer_state.json format is a damaged checkpoint, with a consistent manifest', async () => {
    const dir = await checkpoint();
    const path = join(dir, CHECKPOINT_FILES.state);
    const state = JSON.parse(readFileSync(path, 'utf8'));
    const text = JSON.stringify({ ...state, format: 'someone-else/7' });
    writeFileSync(path, text);
    const m = readManifest(dir);
    m.files[CHECKPOINT_FILES.state] = { size: Buffer.byteLength(text), sha256: sha256Hex(Buffer.from(text)) };
    writeManifest(dir, m);
    expect(await refusal(dir)).toMatchObject({ kind: 'bad-state', field: 'format' });
  });

  it('a checkpoint path that does not exist is still an io error (a crash before the first save)', async () => {
    expect((await refusal(join(tmp('none'), 'checkpoint'))).kind).toBe('io');
  });
});

/**
 * The trainer state is validated, every field against its type and range and against the files it
 * refers to (the optimizer's step, the run's metrics.jsonl), before a step runs or a line of metrics.jsonl is cut.
 * Each case edits a real run's checkpoint and reseals its manifest, so only the trainer's own checks stand.
 */
describe('the trainer state is not trusted', () => {
  const runTask = withReward(additionTask(), (completion) => completion.length % 2);
  const base = { warmStartSteps: 2, steps: 2, checkpointEvery: 1, objective: 'grpo' as const };
  let source: string | null = null;
  /** A finished run (2 warm-start and 2 RL steps, a checkpoint after each), copied fresh for each case. */
  const run = async (): Promise<string> => {
    if (!source) {
      source = join(tmp('run'), 'run');
      await train(tinyRun({ ...base, outputDir: source }), { task: runTask });
    }
    const dir = join(tmp('case'), 'run');
    cpSync(source, dir, { recursive: true, verbatimSymlinks: true });
    return dir;
  };
  const statePath = (dir: string): string => join(dir, 'checkpoint', CHECKPOINT_FILES.state);
  const editState = (
    dir: string,
    edit: (s: { rngs: Record<string, unknown>; trainerState: Record<string, unknown> }) => void,
  ): void => {
    const s = JSON.parse(readFileSync(statePath(dir), 'utf8'));
    edit(s);
    writeFileSync(statePath(dir), JSON.stringify(s, null, 2));
    resealManifest(join(dir, 'checkpoint'));
  };
  /** Resume in place; the run must be refused before any record, with metrics.jsonl untouched. */
  const refusedResume = async (dir: string, over: Partial<TrainConfig> = {}): Promise<Error> => {
    const before = readFileSync(join(dir, 'metrics.jsonl'), 'utf8');
    const records: MetricRecord[] = [];
    const e = await train(tinyRun({ ...base, outputDir: dir, resume: join(dir, 'checkpoint'), ...over }), {
      task: runTask,
      onRecord: (r) => records.push(r),
    }).then(
      () => null,
      (err: unknown) => err as Error,
    );
    expect(e, 'the resume was accepted').not.toBeNull();
    expect(records).toEqual([]);
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(before);
    return e!;
  };
  const damaged = async (dir: string, field: string | RegExp): Promise<void> => {
    const e = await refusedResume(dir);
    expect(e).toBeInstanceOf(CheckpointError);
    expect(e).toMatchObject({
      kind: 'bad-state',
      field: typeof field === 'string' ? field : expect.stringMatching(field),
    });
    expect(describeFailure(e).code).toBe(EXIT.io);
  };

  it('the unedited run resumes (the finished run adds nothing)', async () => {
    const dir = await run();
    const before = readFileSync(join(dir, 'metrics.jsonl'), 'utf8');
    await train(tinyRun({ ...base, outputDir: dir, resume: join(dir, 'checkpoint') }), { task: runTask });
    expect(readFileSync(join(dir, 'metrics.jsonl'), 'utf8')).toBe(before);
  });

  it('step -1 is refused (it re-ran steps and duplicated metric lines)', async () => {
    const dir = await run();
    editState(dir, (s) => (s.trainerState.step = -1));
    await damaged(dir, 'trainerState.step');
  });

  it('step 1e9 is refused (it skipped training and wrote an eval at step 1000000000)', async () => {
    const dir = await run();
    editState(dir, (s) => (s.trainerState.step = 1e9));
    await damaged(dir, 'trainerState.step');
  });

  it('a step that disagrees with metrics.jsonl is refused (step 1 of a checkpoint written at step 2)', async () => {
    const dir = await run();
    editState(dir, (s) => (s.trainerState.step = 1));
    await damaged(dir, 'trainerState.step');
  });

  it('metricsBytes -5 is refused (it emptied metrics.jsonl)', async () => {
    const dir = await run();
    editState(dir, (s) => (s.trainerState.metricsBytes = -5));
    await damaged(dir, 'trainerState.metricsBytes');
  });

  it('metricsBytes inside a line, or past the end of metrics.jsonl, is refused', async () => {
    const dir = await run();
    editState(dir, (s) => (s.trainerState.metricsBytes = (s.trainerState.metricsBytes as number) - 3));
    await damaged(dir, 'trainerState.metricsBytes');
    const past = await run();
    editState(past, (s) => (s.trainerState.metricsBytes = (s.trainerState.metricsBytes as number) + 1e6));
    await damaged(past, 'trainerState.metricsBytes');
  });

  it('an all-zero RNG state is refused (xoshiro would draw zeros forever)', async () => {
    const dir = await run();
    editState(dir, (s) => (s.rngs.train = { s: [0, 0, 0, 0], spare: null }));
    await damaged(dir, 'rngs.train');
  });

  it('a bad phase, evaluation, identity or unknown field is refused naming it', async () => {
    const cases: [(s: Record<string, unknown>) => void, string | RegExp][] = [
      [(t) => (t.phase = 'done'), 'trainerState.phase'],
      [(t) => (t.step = 1.5), 'trainerState.step'],
      [
        (t) => (t.warmStartEval = { passAt1: 2, avgAtK: 0, passAtK: 0, k: 2, prompts: 4 }),
        /trainerState\.warmStartEval/,
      ],
      [(t) => (t.warmStartEval = null), 'trainerState.warmStartEval'],
      [(t) => delete t.identity, 'trainerState.identity'],
      [(t) => ((t.identity as Record<string, unknown>).bicc = 'yes'), 'trainerState.identity.bicc'],
      [(t) => (t.extra = 1), 'trainerState.extra'],
    ];
    for (const [edit, field] of cases) {
      const dir = await run();
      editState(dir, (s) => edit(s.trainerState));
      await damaged(dir, field);
    }
  });

  it("a warm-start step behind its optimizer's step count is refused (no metrics.jsonl beside it to compare)", async () => {
    const dir = await run();
    // The checkpoint alone, away from its run's metrics.jsonl: phase warmstart, step 1, with an optimizer of 2 steps.
    const lone = join(tmp('lone'), 'checkpoint');
    cpSync(join(dir, 'checkpoint'), lone, { recursive: true, dereference: true });
    const s = JSON.parse(readFileSync(join(lone, CHECKPOINT_FILES.state), 'utf8'));
    Object.assign(s.trainerState, { phase: 'warmstart', step: 1, warmStartEval: null, finalEval: null });
    writeFileSync(join(lone, CHECKPOINT_FILES.state), JSON.stringify(s));
    resealManifest(lone);
    const out = join(tmp('lone-out'), 'run');
    const e = await train(tinyRun({ ...base, outputDir: out, resume: lone }), { task: runTask }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toMatchObject({
      kind: 'bad-state',
      field: 'trainerState.step',
      message: expect.stringMatching(/optimizer/),
    });
  });

  it('negative second moments are refused (sqrt of them is NaN)', async () => {
    const dir = await run();
    const path = join(dir, 'checkpoint', CHECKPOINT_FILES.optimizer);
    const file = decodeSafetensors(readFileSync(path));
    if (E.isLeft(file)) throw file.left;
    const tensors = new Map(file.right.tensors);
    const name = [...tensors.keys()].find((n) => n.startsWith('exp_avg_sq.'))!;
    const t = tensors.get(name)!;
    const data = Float32Array.from(t.data);
    data[0] = -1;
    tensors.set(name, { ...t, data });
    writeFileSync(path, encodeSafetensors(tensors, file.right.metadata));
    resealManifest(join(dir, 'checkpoint'));
    const e = await refusedResume(dir);
    expect(e).toMatchObject({ kind: 'bad-state', field: name });
  });

  it("a checkpoint past the command's --steps is a usage error naming the flag (it evaluated and exited 0)", async () => {
    const dir = await run();
    const e = await refusedResume(dir, { steps: 1 });
    expect(e).toBeInstanceOf(TrainConfigError);
    expect(e).toMatchObject({ field: 'steps' });
  });
});
