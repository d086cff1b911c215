import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliBundle } from '../robustness/helpers/cli.js';

/**
 * Issue 35 item 4: `export-config` exited 0 when its output could not be written, so `export-config ... >
 * train.sh && bash train.sh` went on with the configuration lost. Now: exit 3 and one line naming standard output.
 */

const bundle = cliBundle('export-output');
beforeAll(bundle.build, 120_000);
afterAll(bundle.remove);

const ARGS = ['export-config', '--engine', 'verl', '--model', '/models/base'];

describe('export-config whose output cannot be written', () => {
  it('exits 0 with the script when standard output takes it (the control)', () => {
    const r = spawnSync(process.execPath, [bundle.path, ...ARGS], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^#!\/usr\/bin\/env bash\n[\s\S]*python3 -m verl\.trainer\.main_ppo/);
  });

  it.skipIf(!existsSync('/dev/full'))('> /dev/full (no space left): exit 3, one line naming standard output', () => {
    const full = openSync('/dev/full', 'w');
    try {
      const r = spawnSync(process.execPath, [bundle.path, ...ARGS], {
        encoding: 'utf8',
        stdio: ['ignore', full, 'pipe'],
      });
      expect(r.status).toBe(3);
      expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(/^rlvr: standard output: .*ENOSPC/);
    } finally {
      closeSync(full);
    }
  });

  it('standard output closed (>&-): exit 3, one line naming standard output', () => {
    const r = spawnSync('bash', ['-c', `"${process.execPath}" "${bundle.path}" ${ARGS.join(' ')} >&-`], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(3);
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^rlvr: standard output: /);
  });
});

describe('the docs redirect export-config with a command that prints only the configuration', () => {
  // Issue 38: `npm run rlvr -- export-config ... > file` wrote npm's banner into the file ("line 2: rlvr: command
  // not found"); `npx rlvr` and `npm run -s rlvr --` print the CLI's output alone.
  it('every line of README.md, python/README.md and docs/ARCHITECTURE.md that redirects it uses one', () => {
    const lines = ['README.md', 'python/README.md', 'docs/ARCHITECTURE.md'].flatMap((file) =>
      readFileSync(file, 'utf8')
        .split('\n')
        .filter((l) => /rlvr\b.*export-config.*>/.test(l))
        .map((l) => `${file}: ${l}`),
    );
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((l) => !/: (npx rlvr|npm run -s rlvr --) export-config /.test(l))).toEqual([]);
  });
});
