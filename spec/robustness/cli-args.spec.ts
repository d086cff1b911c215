import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src/cli/args.js';
import { MemoryError } from '../../src/training/memory.js';
import { packSequences } from '../../src/rl/batch.js';
import { additionTask, withReward } from '../../src/tasks/index.js';
import { TrainConfigError } from '../../src/training/config.js';
import { train } from '../../src/training/trainer.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/** The command line as a careless user types it. */
const left = (argv: string[]): TrainConfigError => {
  const r = parseTrainArgs(argv);
  if (E.isRight(r)) throw new Error(`accepted: ${argv.join(' ')}`);
  expect(r.left).toBeInstanceOf(TrainConfigError);
  expect(r.left.message.split('\n')).toHaveLength(1);
  return r.left;
};
const right = (argv: string[]) => {
  const r = parseTrainArgs(argv);
  if (E.isLeft(r)) throw r.left;
  return r.right;
};

describe('negative numbers are values; messages quote a bounded prefix', () => {
  it("--seed -1, --weight-decay -0.5 and --margin=-0.1 are values (Node's parser called them ambiguous options)", () => {
    expect(right(['--seed', '-1']).seed).toBe(-1);
    // ConSPO reads -0.1 as the margin, and refuses it by its flag (a margin is >= 0)
    expect(left(['--objective', 'conspo', '--margin', '-0.1'])).toMatchObject({ field: '--margin', value: -0.1 });
    expect(right(['--objective', 'conspo', '--margin=0.1']).objectiveOptions).toMatchObject({ margin: 0.1 });
    expect(right(['--seed=-7']).seed).toBe(-7);
    // a value the field refuses is then its own message, one line, naming the flag
    const e = left(['--weight-decay', '-0.5']);
    expect(e.field).toBe('--weight-decay');
    expect(e.message.split('\n')).toHaveLength(1);
  });

  it('a 100 KB value is quoted by a bounded prefix, and argv is never echoed whole', () => {
    const huge = 'x'.repeat(100_000);
    for (const argv of [['--seed', huge], ['--task', huge], ['--bogus-flag', huge], [huge], ['--steps', '1', huge]]) {
      const e = left(argv);
      expect(e.message.length).toBeLessThan(400);
      expect(e.message).not.toMatch(/Did you forget|To specify/);
    }
  });

  it('an unknown flag, a missing value and a stray argument are one line naming them', () => {
    expect(left(['--stesp', '3'])).toMatchObject({ field: '--stesp' });
    expect(left(['--steps'])).toMatchObject({ field: '--steps' });
    expect(left(['--output', '--steps', '3'])).toMatchObject({ field: '--output' });
    expect(left(['--steps', '3', 'extra'])).toMatchObject({ field: 'extra' });
    expect(left(['--bicc=yes'])).toMatchObject({ field: '--bicc' });
    expect(left(['--steps', '3', '--steps', '4'])).toMatchObject({ field: '--steps' });
  });
});

describe('an empty value is a usage error', () => {
  for (const flag of [
    'output',
    'resume',
    'model',
    'dataset',
    'task',
    'objective',
    'backend',
    'advantage',
    'loss-type',
  ]) {
    it(`--${flag} '' is refused naming the flag (it was silently ignored)`, () => {
      const e = left([`--${flag}`, '']);
      expect(e.field).toBe(`--${flag}`);
      expect(e.message).toMatch(/empty/);
    });
  }
});

describe('no stack overflow from spreading large arrays', () => {
  const task = withReward(additionTask(), (c) => c.length % 2);
  it('packSequences over 300,000 rows (a spread of that many arguments overflowed the stack)', () => {
    const rows = Array.from({ length: 300_000 }, (_, i) => [1, 2 + (i % 3)]);
    const b = packSequences(rows, rows, 0);
    expect([b.batchSize, b.promptLen, b.completionLen]).toEqual([300_000, 2, 2]);
  });

  it('--eval-prompts 1e6 reaches the memory estimate (it ended in RangeError: Maximum call stack size exceeded)', async () => {
    const e = await train(tinyRun({ evalPrompts: 1_000_000 }), {
      task,
      onMemoryEstimate: () => {
        throw new Error('reached the estimate');
      },
    }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(String(e)).toMatch(/reached the estimate/);
  }, 60_000);

  it('--warm-start-batch-size 1e6 is in the memory estimate and refused by it (it ended in RangeError)', async () => {
    const e = await train(tinyRun({ warmStartBatchSize: 1_000_000 }), {
      task,
      memoryLimits: { totalBytes: 2 ** 30 },
    }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(MemoryError);
  }, 60_000);
});

describe('the defaults are the main job, and its warm-start target can be turned off', () => {
  it('no flags: 2+1-digit addition, GRPO, the warm-start until 0.4 (at most 600 steps), 300 steps at 5e-4, T 0.7', () => {
    expect(right([])).toMatchObject({
      task: 'addition',
      digits: [2, 1],
      objective: 'grpo',
      warmStartSteps: 600,
      warmStartUntil: 0.4,
      steps: 300,
      learningRate: 5e-4,
      warmupSteps: 20,
      temperature: 0.7,
    });
  });

  it('--warm-start-until none runs every warm-start step; another word is not a number', () => {
    expect(right(['--warm-start-until', 'none']).warmStartUntil).toBeNull();
    expect(right(['--warm-start-until', '0.5']).warmStartUntil).toBe(0.5);
    expect(left(['--warm-start-until', 'off'])).toMatchObject({ field: '--warm-start-until' });
    // `none` is a word of this flag only
    expect(left(['--steps', 'none'])).toMatchObject({ field: '--steps' });
  });
});
