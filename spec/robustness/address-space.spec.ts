import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { TINY_ARGS } from './helpers/cli.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * Under an address-space limit (ulimit -v) the cpu backend's WebAssembly memory and its guard regions may not
 * fit: the CLI says so in one line, with the workaround, instead of dying in a V8 fatal error.
 */

/** Whether `bash -c 'ulimit -v N'` works here (not on Windows, nor where bash is missing). */
const hasUlimit = spawnSync('bash', ['-c', 'ulimit -v 8388608'], { encoding: 'utf8' }).status === 0;

describe.skipIf(!hasUlimit)('an address-space limit (ulimit -v) too low for the cpu backend', () => {
  const bundle = useCliBundle('address-space');
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
    // 8 GiB: the 4 GiB memory fits, Node 20's V8 guard regions around it (about 10 GiB in all) do not. Node 26's
    // V8 reserves the shared memory without them and runs there: then the run must simply succeed.
    const r = underLimit(8 * 1024 * 1024);
    if (Number(process.versions.node.split('.')[0]) >= 22 && r.status === 0) {
      expect(r.stderr).toBe('');
      return;
    }
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
    // Node 20 fits 1-3 threads here; Node 26's V8 reserves less per memory, and all 4 fit.
    const threads = Number(process.versions.node.split('.')[0]) >= 22 ? '[1234]' : '[123]';
    if (r.status === 0)
      expect(r.stdout).toMatch(
        new RegExp(`cpu \\(WebAssembly (relaxed SIMD \\(fused multiply-add\\)|SIMD) kernels, ${threads} threads?`),
      );
  });
});
