import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it } from 'vitest';
import { CpuBackend, defaultThreads, MAX_THREADS } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { BackendError } from '../../src/core/errors.js';
import { MIN_TEMPERATURE, parseTrainConfig } from '../../src/training/config.js';
import { rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * Numbers a run is given, in the config, on the command line or in RLVR_THREADS: written in decimal, and inside
 * the range where they work. Out of it they are usage errors (exit 2) naming the field, never a run that exhausts
 * the machine or ends as "training diverged".
 */
const bundle = useCliBundle('number-bounds');

describe('a thread count past MAX_THREADS (256) is refused, not spawned until memory runs out', () => {
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

describe('a temperature whose scaled logits overflow f32 is a usage error, not "training diverged"', () => {
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

describe('numbers on the command line are decimal only', () => {
  const errorFor = (argv: string[]): string => {
    const r = parseTrainArgs(argv);
    return E.isLeft(r) ? r.left.message : 'accepted';
  };

  it.each([
    ['--steps', '0x10'],
    ['--steps', '0b11'],
    ['--steps', '0o7'],
    ['--seed', 'Infinity'],
    ['--steps', ' '],
    ['--steps', '1_0'],
    ['--learning-rate', '0x1p-3'],
    ['--d-model', '1e'],
  ])('%s %j is "not a number"', (flag, value) => {
    const msg = errorFor([flag, value]);
    expect(msg).toContain(flag);
    expect(msg).toContain('is not a number');
  });

  it('decimal integers, fractions and exponents still parse', () => {
    const r = parseTrainArgs(['--steps', '+16', '--learning-rate', '3e-4', '--temperature', '.5', '--seed', '7']);
    expect(E.isRight(r) && [r.right.steps, r.right.learningRate, r.right.temperature, r.right.seed]).toEqual([
      16, 3e-4, 0.5, 7,
    ]);
  });

  it('--digits takes decimal only too', () => {
    expect(errorFor(['--digits', '0x2'])).toContain('--digits');
    expect(errorFor(['--digits', '1,0b11'])).toContain('--digits');
    const r = parseTrainArgs(['--digits', '1, 2']);
    expect(E.isRight(r) && r.right.digits).toEqual([1, 2]);
  });

  describe('RLVR_THREADS', () => {
    const was = process.env.RLVR_THREADS;
    afterEach(() => {
      if (was === undefined) delete process.env.RLVR_THREADS;
      else process.env.RLVR_THREADS = was;
    });
    it.each(['0x10', '0b11', ' 4', '4.0', '1e1'])('refuses %j', (v) => {
      process.env.RLVR_THREADS = v;
      expect(() => defaultThreads()).toThrow(/RLVR_THREADS must be a whole number/);
    });
    it('takes 4', () => {
      process.env.RLVR_THREADS = '4';
      expect(defaultThreads()).toBe(4);
    });
  });
});
