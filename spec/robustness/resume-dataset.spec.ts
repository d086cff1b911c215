import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { loadCheckpoint } from '../../src/io/checkpoint.js';
import type { TrainConfig } from '../../src/training/config.js';
import { ResumeMismatchError } from '../../src/training/resume-check.js';
import { parseTrainerState } from '../../src/training/trainer-state.js';
import { train } from '../../src/training/trainer.js';
import { rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';
import { rejectionOf, tempDir, tinyGrpoRun, useCliBundle } from './helpers/harness.js';

/**
 * A resume on another dataset is a task mismatch, not a run that silently changes its data: the checkpoint
 * records the dataset's path and SHA-256, and a resume checks the rows it is given against them.
 */
const bundle = useCliBundle('resume-dataset');
const tmp = (name: string): string => tempDir(`resume-${name}`);

const row = (prompt: string, answer: number): string => JSON.stringify({ prompt, answer });
const rows = (shift: number): string =>
  `${Array.from({ length: 40 }, (_, i) => row(`${i}+${(i + shift) % 7}=`, i + ((i + shift) % 7))).join('\n')}\n`;
const write = (dir: string, name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

describe('a resume on another dataset is a task mismatch, not a run that silently changes its data', () => {
  it('the checkpoint records the path and SHA-256; other rows are refused, the same rows elsewhere resume', async () => {
    const dir = tmp('dataset');
    const a = write(dir, 'a.jsonl', rows(0));
    const b = write(dir, 'b.jsonl', rows(3));
    const out = join(dir, 'R');
    await train(tinyGrpoRun({ dataset: a, outputDir: out }));
    const ck = await loadCheckpoint(join(out, 'checkpoint'))();
    if (E.isLeft(ck)) throw ck.left;
    const sha256 = createHash('sha256').update(rows(0)).digest('hex');
    expect(ck.right.trainerState).toMatchObject({ identity: { dataset: { path: a, sha256 } } });

    const resume = (over: Partial<TrainConfig>, name: string) =>
      rejectionOf(
        train(tinyGrpoRun({ steps: 2, resume: join(out, 'checkpoint'), outputDir: join(dir, name), ...over })),
      );
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
    await train(tinyGrpoRun({ outputDir: out }));
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
