import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir, useCliBundle } from './helpers/harness.js';

/**
 * `npm run export:golden` where it cannot write (python/tests/golden a file, python/tests missing) printed a
 * 15-line stack trace and exited 1. It is one line naming the path and cause, exit 3, as rlvr's file failures are.
 */
const exporter = useCliBundle('golden-export', 'examples/export-golden.ts');

const runIn = (cwd: string) =>
  spawnSync(process.execPath, [exporter.path], { cwd, encoding: 'utf8', timeout: 120_000 });

describe('export:golden into a place it cannot write', () => {
  it('python/tests/golden is a file: one line naming the path, exit 3', () => {
    const root = tempDir('golden-file');
    mkdirSync(join(root, 'python', 'tests'), { recursive: true });
    writeFileSync(join(root, 'python', 'tests', 'golden'), 'not a directory');
    const r = runIn(root);
    expect(r.status).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^export:golden: python\/tests\/golden\/\w+\.json: .*\(ENOTDIR\)$/),
    ]);
  }, 130_000);

  it('outside the repository (no python/tests): one line, exit 3; inside it, the files are written', () => {
    const r = runIn(tempDir('golden-none'));
    expect(r.status).toBe(3);
    expect(r.stderr.trim().split('\n')).toEqual([
      'export:golden: python/tests/golden: no such file or directory (ENOENT)',
    ]);
    const root = tempDir('golden-ok');
    mkdirSync(join(root, 'python', 'tests'), { recursive: true });
    const ok = runIn(root);
    expect([ok.status, ok.stderr]).toEqual([0, '']);
    expect(readdirSync(join(root, 'python', 'tests', 'golden')).length).toBeGreaterThan(5);
  }, 250_000);
});
