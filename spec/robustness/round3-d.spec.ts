import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { spawnSync } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { dispose } from '../../src/core/scope.js';
import { type Checkpoint, loadCheckpoint, READ_TRIES, readHooks, saveCheckpoint } from '../../src/nn/checkpoint.js';
import { initParams } from '../../src/nn/transformer.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';
import { cliBundle, TINY_ARGS } from './helpers/cli.js';
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

describe('a checkpoint read while another run replaces it', () => {
  const config = tinyConfig();
  const params = initParams(config, new Rng(3));
  const save = async (dir: string, step: number): Promise<void> => {
    const res = await saveCheckpoint(dir, { config, params, trainerState: { step } })();
    if (E.isLeft(res)) throw res.left;
  };
  const stepOf = (ck: Checkpoint): unknown => (ck.trainerState as { step?: number } | null)?.step;
  const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-r3d-${name}-`));
  afterEach(() => {
    readHooks.afterResolve = null;
  });

  it('starts over from the new generation when the one it resolved is removed under it', async () => {
    const dir = join(tmp('swap'), 'checkpoint');
    await save(dir, 1);
    const seen: [string, number][] = [];
    // The writer saves (swaps the link, removes the older generation) right after the reader resolved it.
    readHooks.afterResolve = async (resolved, attempt) => {
      seen.push([resolved.slice(dir.length), attempt]);
      if (attempt === 0) await save(dir, 2);
    };
    const res = await loadCheckpoint(dir)();
    expect(seen).toEqual([
      ['.gen-1', 0],
      ['.gen-2', 1],
    ]);
    expect(E.isRight(res) && stepOf(res.right)).toBe(2);
    if (E.isRight(res)) dispose([res.right.params]);
  });

  it('reports one replaced on every try as busy, never as damaged', async () => {
    const dir = join(tmp('busy'), 'checkpoint');
    await save(dir, 0);
    let saves = 0;
    readHooks.afterResolve = () => save(dir, ++saves);
    const res = await loadCheckpoint(dir)();
    expect(saves).toBe(READ_TRIES);
    expect(E.isLeft(res) && res.left).toMatchObject({ kind: 'io' });
    expect(E.isLeft(res) && res.left.message).toMatch(/replaced 10 times while it was being read/);
  });

  it('loads a whole generation every time while a save loop runs', async () => {
    const dir = join(tmp('loop'), 'checkpoint');
    await save(dir, 0);
    let saving = true;
    let saved = 0;
    const writer = (async () => {
      while (saving) await save(dir, ++saved);
    })();
    const failures: string[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const res = await loadCheckpoint(dir)();
        if (E.isLeft(res)) failures.push(res.left.message);
        else if (typeof stepOf(res.right) !== 'number') failures.push('no trainer state');
        if (E.isRight(res)) dispose([res.right.params]);
      }
    } finally {
      saving = false;
      await writer;
    }
    expect(failures).toEqual([]);
    expect(saved).toBeGreaterThan(1);
  });
});

/** Whether `bash -c 'ulimit -v N'` works here (not on Windows, nor where bash is missing). */
const hasUlimit = spawnSync('bash', ['-c', 'ulimit -v 8388608'], { encoding: 'utf8' }).status === 0;

describe.skipIf(!hasUlimit)('an address-space limit (ulimit -v) too low for the cpu backend', () => {
  const bundle = cliBundle('round3-d');
  beforeAll(bundle.build, 60_000);
  afterAll(bundle.remove);
  const underLimit = (kib: number, env: Record<string, string> = {}) =>
    spawnSync(
      'bash',
      ['-c', `ulimit -v ${kib} && exec "$0" "$@"`, process.execPath, bundle.path, 'train', ...TINY_ARGS],
      {
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, NODE_OPTIONS: '', ...env },
      },
    );

  it('is refused with one line and exit 2, saying what it needs and why', () => {
    // 8 GiB: the 4 GiB memory fits, V8's guard regions around it (about 10 GiB in all) do not.
    const r = underLimit(8 * 1024 * 1024);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^rlvr: cpu: cannot reserve its WebAssembly memory: up to 4 GiB plus the guard regions/);
    expect(r.stderr).toContain('(ulimit -v: 8 GiB)');
    expect(r.stderr).toContain('--disable-wasm-trap-handler');
    expect(r.status).toBe(2);
  });

  it('runs under the same limit with the workaround it names', () => {
    const r = underLimit(8 * 1024 * 1024, { NODE_OPTIONS: '--disable-wasm-trap-handler' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('starts no more worker threads than the address space leaves room for (a V8 fatal error otherwise)', () => {
    // 11 GiB: the memory and its guard regions fit, with room for the calling thread but not for 3 more isolates.
    const r = underLimit(11 * 1024 * 1024, { RLVR_THREADS: '4' });
    expect(r.stderr).not.toMatch(/Fatal|OOM/);
    expect(r.signal).toBeNull();
    // Exit 2 (the refusal above) where this Node maps more at its start; never a crash or an internal error.
    expect([0, 2]).toContain(r.status);
    if (r.status === 0) expect(r.stdout).toMatch(/cpu \(WebAssembly SIMD kernels, [123] threads?/);
  });
});
