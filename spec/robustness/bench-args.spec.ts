import { spawnSync } from 'node:child_process';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseBenchGpuArgs } from '../../bench/gpu.bench.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * `npm run bench:gpu` reads its arguments by `rlvr train`'s rules: `--tasks bogus` ran an empty table,
 * `--rounds abc` "NaN interleaved rounds" and `--rounds 0` nothing, each with exit 0. Now each is one line naming
 * the flag, exit 2, before a device is opened.
 */
const bench = useCliBundle('bench-args', 'bench/gpu.bench.ts', '.gpu.bench.js');

const refused = (argv: string[]): string => {
  const r = parseBenchGpuArgs(argv);
  if (E.isRight(r)) throw new Error(`accepted: ${argv.join(' ')}`);
  return r.left.message;
};

describe('bench:gpu arguments', () => {
  it('refuses bad values, unknown flags, stray arguments and repeats, naming them', () => {
    expect(refused(['--tasks', 'bogus'])).toMatch(
      /^--tasks = "bogus" names "bogus", not one of matmul, step, sample, lora, f16$/,
    );
    expect(refused(['--tasks', 'matmul,'])).toMatch(/^--tasks = "matmul," names "", not one of/);
    for (const rounds of ['abc', '0', '-1', '1.5', '0x10', 'Infinity', '1e9'])
      expect(refused(['--rounds', rounds])).toMatch(/^--rounds = ".*" must be a whole number in 1\.\.1000$/);
    expect(refused(['--round', '3'])).toMatch(/^--round is not an option of bench:gpu/);
    expect(refused(['extra'])).toMatch(/^extra is not an option/);
    expect(refused(['--rounds'])).toBe('--rounds needs a value');
    expect(refused(['--quick=yes'])).toBe('--quick = "yes" takes no value');
    expect(refused(['--rounds', '2', '--rounds', '3'])).toBe('--rounds = "3" is given twice');
    for (const seconds of ['0', '-5', 'abc', 'Infinity'])
      expect(refused(['--seconds', seconds])).toMatch(/^--seconds = ".*" must be a positive number of seconds$/);
  });

  it('takes --quick, --rounds N and --tasks LIST', () => {
    expect(parseBenchGpuArgs([])).toEqual(E.right({ quick: false }));
    expect(parseBenchGpuArgs(['--quick', '--rounds=2', '--tasks', 'step, matmul'])).toEqual(
      E.right({ quick: true, rounds: 2, tasks: ['step', 'matmul'] }),
    );
    expect(parseBenchGpuArgs(['--quick', '--tasks', 'lora'])).toEqual(E.right({ quick: true, tasks: ['lora'] }));
    expect(parseBenchGpuArgs(['--seconds', '420'])).toEqual(E.right({ quick: false, seconds: 420 }));
  });

  it('the command: exit 2 and one line for each, before a device is opened', () => {
    for (const argv of [
      ['--tasks', 'bogus'],
      ['--rounds', 'abc'],
      ['--rounds', '0'],
    ]) {
      const r = spawnSync(process.execPath, [bench.path, ...argv], { encoding: 'utf8', timeout: 60_000 });
      expect([r.status, r.stdout]).toEqual([2, '']);
      expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(new RegExp(`^bench:gpu: ${argv[0]} = `))]);
    }
  });
});
