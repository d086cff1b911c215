import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * `npm run example:hf` left 21 MB + 105 MB in temporary directories per run. It removes what it
 * made when it ends; a TMPDIR of its own shows what is left.
 */
describe('example:hf leaves no temporary directory', () => {
  it('the model and the run directories are gone after the example ends', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'rlvr-example-tmp-'));
    const r = spawnSync(
      join('node_modules', '.bin', 'vite-node'),
      ['--config', 'vitest.config.ts', 'examples/hf-qwen3.ts', '--steps', '0', '--warm-start-steps', '0'],
      { encoding: 'utf8', timeout: 240_000, env: { ...process.env, TMPDIR: tmp } },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/--output DIR keeps the base in DIR/);
    expect(readdirSync(tmp).filter((e) => e.startsWith('qwen3-'))).toEqual([]);
  }, 240_000);
});
