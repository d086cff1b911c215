import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { DatasetError, parseDataset, verifyBoxed } from '../../src/tasks/dataset.js';
import { boxed } from '../../src/tasks/boxed.js';
import { splitOf } from '../../src/tasks/task.js';
import type { TrainConfig } from '../../src/training/config.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * A dataset is read streaming, every row checked up front (its length in tokens against
 * the model, its answer against the verifier) with the file and line in the message, before anything trains.
 */
const tmp = (): string => mkdtempSync(join(tmpdir(), 'rlvr-data-'));
const SMALL: Partial<TrainConfig> = { warmStartSteps: 2, steps: 1, objective: 'grpo' };
const row = (prompt: string, answer: string | number): string => JSON.stringify({ prompt, answer });
/** Rows on both sides of the hash split (short prompts: the tiny model's 24 positions). */
const base = (): string[] => Array.from({ length: 40 }, (_, i) => row(`${i}+${i % 7}=`, i + (i % 7)));
const write = (lines: readonly string[]): string => {
  const path = join(tmp(), 'data.jsonl');
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
};
/** The run's refusal, checked to come before any record. */
async function refused(dataset: string): Promise<unknown> {
  const records: MetricRecord[] = [];
  const e = await train(tinyRun({ ...SMALL, dataset }), { onRecord: (r) => records.push(r) }).then(
    () => null,
    (err: unknown) => err,
  );
  expect(records).toEqual([]);
  expect(e).not.toBeNull();
  return e;
}
/** A prompt of the training side of the split, `n` characters long. */
function trainingPrompt(n: number): string {
  for (let k = 0; ; k++) {
    const p = `${'9'.repeat(n - String(k).length - 1)}${k}=`;
    if (splitOf(p) === 'train') return p;
  }
}

describe('every dataset row is checked up front, naming file and line', () => {
  it('a 10 MB prompt line is refused at once naming file:line (25 s and 5.1 GB, naming neither)', async () => {
    const lines = base();
    lines.splice(2, 0, row('1'.repeat(10 * 1024 * 1024), 1));
    const path = write(lines);
    const t0 = performance.now();
    const e = await refused(path);
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(e).toBeInstanceOf(DatasetError);
    expect(e).toMatchObject({ file: path, line: 3 });
    expect((e as Error).message.length).toBeLessThan(500);
    expect(describeFailure(e).line).toContain(`${path}:3`);
    expect(describeFailure(e).code).toBe(EXIT.usage);
  }, 30_000);

  it('a training row too long for the model is refused before warm-start (it died at warm-start step 224)', async () => {
    const lines = base();
    lines.splice(20, 0, row(trainingPrompt(30), 5)); // 30 characters + BOS + 6 completion tokens > 24 positions
    const path = write(lines);
    const e = await refused(path);
    expect(e).toBeInstanceOf(DatasetError);
    expect(e).toMatchObject({ file: path, line: 21, field: 'prompt' });
    expect((e as Error).message).toMatch(/tokens/);
  });

  it('a worked answer too long for the completion budget is refused naming its line', async () => {
    const lines = base();
    lines.splice(5, 0, row('1+1=', '1234567890'));
    const path = write(lines);
    const e = await refused(path);
    expect(e).toMatchObject({ file: path, line: 6, field: 'answer' });
  });

  it('a file of valid rows still trains', async () => {
    const records: MetricRecord[] = [];
    await train(tinyRun({ ...SMALL, dataset: write(base()) }), { onRecord: (r) => records.push(r) });
    expect(records.some((r) => r.phase === 'rl')).toBe(true);
  });
});

describe('answers the verifier cannot match are refused', () => {
  const cases: [string, string][] = [
    ['unbalanced braces', row('1+1=', 'a}b{')],
    ['a number too large for a double', '{"prompt": "1+1=", "answer": 1e400}'],
    ['a number written by JavaScript in exponent form', '{"prompt": "1+1=", "answer": 1e21}'],
    ['an empty answer', row('1+1=', '')],
    ['an answer closing the box early', row('1+1=', '2}')],
  ];
  for (const [what, line] of cases) {
    it(`${what}: refused naming file:line (it was accepted and its own solution scored 0)`, () => {
      const r = parseDataset(`${row('2+2=', 4)}\n${line}\n`, 'd.jsonl');
      expect(E.isLeft(r) && r.left).toMatchObject({ file: 'd.jsonl', line: 2, field: 'answer' });
    });
  }

  it('every accepted answer is matched by its own worked solution', () => {
    const ok = ['4', '-0.5', '1,000', '\\frac{1}{2}', 'x + y', '{a}', 3.25, 7, 'ok'];
    const r = parseDataset(ok.map((a) => row('1+1=', a)).join('\n'), 'ok.jsonl');
    if (E.isLeft(r)) throw r.left;
    for (const p of r.right) expect(verifyBoxed(boxed(p.answer), p.answer)).toBe(1);
  });
});
