import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * On a fresh clone (after `npm ci`, nothing built) `npx rlvr` ran a bin pointing into an
 * unbuilt dist/ (exit 127); `npm run rlvr` rebuilt every bundle on every call (5.7 s against 0.6 s for --help).
 * The bin is a launcher that builds the CLI bundle when it is missing or older than its sources, and only then.
 * A temporary clone (the files a clone has, node_modules linked) stands in for a fresh one.
 */
function freshClone(): string {
  const dir = mkdtempSync(join(tmpdir(), 'rlvr-clone-'));
  for (const f of [
    'package.json',
    'esbuild.config.mjs',
    'esbuild.browser.mjs',
    'esbuild.wasm.mjs',
    'bin',
    'src',
    'shaders',
  ])
    cpSync(f, join(dir, f), { recursive: true });
  symlinkSync(resolve('node_modules'), join(dir, 'node_modules'));
  return dir;
}
const run = (cwd: string, command: string, args: string[]) =>
  spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 120_000 });

describe('rlvr on a fresh clone, and without needless rebuilds', () => {
  it('npx rlvr works on a fresh clone (it exited 127), building only the CLI', () => {
    const clone = freshClone();
    expect(existsSync(join(clone, 'dist'))).toBe(false);
    const r = run(clone, 'npx', ['--no-install', 'rlvr', 'help']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: rlvr <command>/m);
    expect(existsSync(join(clone, 'dist', 'cli', 'main.js'))).toBe(true);
    expect(existsSync(join(clone, 'dist', 'examples'))).toBe(false);
  }, 120_000);

  it('npm run rlvr rebuilds nothing when nothing changed, and the CLI when a source did', () => {
    const clone = freshClone();
    const bundle = join(clone, 'dist', 'cli', 'main.js');
    expect(run(clone, 'npm', ['run', '--silent', 'rlvr', '--', 'help']).status).toBe(0);
    const built = statSync(bundle).mtimeMs;
    const t0 = performance.now();
    const again = run(clone, 'npm', ['run', '--silent', 'rlvr', '--', 'help']);
    expect(again.status, again.stderr).toBe(0);
    expect(statSync(bundle).mtimeMs).toBe(built); // not rebuilt
    expect(performance.now() - t0).toBeLessThan(4_000);
    // a source newer than the bundle: rebuilt before running
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(clone, 'src', 'cli', 'args.ts'), later, later);
    expect(run(clone, 'npm', ['run', '--silent', 'rlvr', '--', 'help']).status).toBe(0);
    expect(statSync(bundle).mtimeMs).toBeGreaterThan(built);
  }, 120_000);
});
