import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it } from 'vitest';
import { defaultThreads } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';

/** Issue 26 ("Hardening, round 3"), items of part d. */

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
