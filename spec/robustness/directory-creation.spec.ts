import { spawnSync } from 'node:child_process';
import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Tuner, type TuneJob } from '../../src/backends/webgpu/tuner.js';
import { FileSystemError } from '../../src/platform/errors.js';
import { makeDirectories, makeDirectoriesSync } from '../../src/platform/files.js';
import { TINY_ARGS } from './helpers/cli.js';
import { rejectionOf, tempDir, useCliBundle } from './helpers/harness.js';

/**
 * Directories are made one level at a time. Node 20's recursive `mkdir` never settles under a directory that
 * exists but takes no new entries with ENOENT (`/proc/1/x`): `--output /proc/1/x` and `RLVR_TUNE_CACHE=/proc/1/c`
 * spun a thread of the pool forever, deaf to SIGTERM and SIGINT. Now the run ends with exit 3 naming the path, and
 * the tuning cache runs on without saving, as a read-only one does.
 */
const bundle = useCliBundle('directory-creation');
/** A directory that exists and refuses new entries with ENOENT (Linux's /proc/<pid>). */
const REFUSING = '/proc/1';
const refusingExists = existsSync(REFUSING) && statSync(REFUSING).isDirectory();

/** What the promise settles to within `ms`, or 'pending' (a hang, which the old mkdir was). */
const within = (p: Promise<unknown>, ms: number): Promise<unknown> =>
  Promise.race([rejectionOf(p), new Promise((resolve) => setTimeout(() => resolve('pending'), ms).unref())]);

describe('makeDirectories: each level made once, a failure naming it', () => {
  it('makes the missing levels, accepts an existing directory, and names a file in the way', async () => {
    const root = tempDir('mkdirs');
    const deep = join(root, 'a', 'b', 'c');
    await makeDirectories(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    await makeDirectories(deep);
    makeDirectoriesSync(join(root, 'a', 'd', 'e'));
    expect(statSync(join(root, 'a', 'd', 'e')).isDirectory()).toBe(true);
    writeFileSync(join(root, 'file'), 'x');
    for (const target of [join(root, 'file'), join(root, 'file', 'sub')]) {
      const e = await rejectionOf(makeDirectories(target));
      expect(e).toBeInstanceOf(FileSystemError);
      expect((e as FileSystemError).message).toMatch(/file(\/sub)?: .*\(ENOTDIR\)$/);
      expect(() => makeDirectoriesSync(target)).toThrow(FileSystemError);
    }
  });

  it.skipIf(!refusingExists)(`under ${REFUSING}: an error naming the level, at once, async and sync`, async () => {
    for (const target of [`${REFUSING}/x`, `${REFUSING}/x/y/z`]) {
      const e = await within(makeDirectories(target), 5_000);
      expect(e).toBeInstanceOf(FileSystemError);
      expect((e as FileSystemError).message).toMatch(/^\/proc\/1\/x: /);
      expect(() => makeDirectoriesSync(target)).toThrow(/^\/proc\/1\/x: /);
    }
  });
});

describe.skipIf(!refusingExists)('a directory that cannot be made ends the run, or leaves the cache unsaved', () => {
  it('rlvr train --output /proc/1/x: exit 3 with one line naming the path, well within the timeout', () => {
    // SIGKILL at the timeout: the old hang ignored SIGTERM, and spawnSync would wait on it for ever.
    const r = spawnSync(process.execPath, [bundle.path, 'train', ...TINY_ARGS, '--output', `${REFUSING}/x/run`], {
      encoding: 'utf8',
      timeout: 60_000,
      killSignal: 'SIGKILL',
    });
    expect(r.signal).toBeNull();
    expect(r.status).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^rlvr: \/proc\/1\/x: .*\(ENOENT\)$/)]);
  }, 70_000);

  it('the tuning cache under /proc/1: tuning settles, the choice is kept in memory, the cause is reported', async () => {
    const tuner = new Tuner('test adapter', 'wall-clock', { tune: true, tuneCacheDir: `${REFUSING}/c` });
    const job: TuneJob = {
      kernel: 'k',
      shapeClass: 'c',
      candidates: ['slow', 'fast'],
      trial: () => ({
        result: async () => new Float32Array([1]),
        time: async (c) => (c === 'fast' ? 1 : 2),
        agree: () => true,
        dispose: () => undefined,
      }),
    };
    expect(tuner.pick(job)).toBe('slow');
    expect(await within(tuner.run(), 5_000)).toBeNull();
    expect(tuner.pick(job)).toBe('fast');
    expect(tuner.saveError).toMatch(/^\/proc\/1\/c: /);
  });
});

describe('a cache directory that can be made is made', () => {
  it('the tuning cache makes its missing levels and saves there', async () => {
    const dir = join(tempDir('tune-cache'), 'x', 'y');
    const tuner = new Tuner('test adapter', 'wall-clock', { tune: true, tuneCacheDir: dir });
    const job: TuneJob = {
      kernel: 'k',
      shapeClass: 'c',
      candidates: ['a', 'b'],
      trial: () => ({
        result: async () => new Float32Array([1]),
        time: async () => 1,
        agree: () => true,
        dispose: () => undefined,
      }),
    };
    tuner.pick(job);
    await tuner.run();
    expect(tuner.saveError).toBeNull();
    expect(existsSync(tuner.cacheFile!)).toBe(true);
  });
});
