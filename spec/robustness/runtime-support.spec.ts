import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { OLDEST_SUPPORTED_NODE, unsupportedRuntimeLine } from '../../src/cli/runtime-support.js';

/**
 * Node 20 reached end of life on 2026-04-30: the package declares Node >= 22, CI runs the current LTS, and the CLI
 * says in one line on an older Node that it runs unsupported, then runs.
 */
describe('supported Node', () => {
  // The CLI bundle the cases below run, built once.
  beforeAll(() => {
    execFileSync(process.execPath, ['esbuild.config.mjs', '--cli'], { stdio: 'ignore' });
  }, 120_000);

  it('an older Node gets one line naming the end of life and what it lacks; 22 and later get none', () => {
    const line = unsupportedRuntimeLine('20.20.2', {});
    expect(line).toMatch(/^rlvr: Node 20\.20\.2 is unsupported .*2026-04-30.*fused multiply-add.*4 GiB.*Node >= 22/);
    expect(line).not.toContain('\n');
    expect(unsupportedRuntimeLine('18.0.0', {})).toBeDefined();
    expect(unsupportedRuntimeLine('20.20.2', { RLVR_NO_RUNTIME_NOTE: '1' })).toBeUndefined();
    for (const v of ['22.0.0', '22.23.3', '24.21.0', '26.12.1', '30.1.0'])
      expect(unsupportedRuntimeLine(v, {})).toBeUndefined();
  });

  it("package.json's engines, the CLI's floor and CI's smoke-run Node agree", () => {
    const engines = JSON.parse(readFileSync('package.json', 'utf8')).engines.node;
    expect(engines).toBe(`>=${OLDEST_SUPPORTED_NODE}`);
    const nodeSh = readFileSync('.ci/node.sh', 'utf8');
    expect(nodeSh).toMatch(new RegExp(`^NODE_FLOOR=${OLDEST_SUPPORTED_NODE}\\.\\d+\\.\\d+`, 'm'));
    expect(Number(/^NODE_LTS=(\d+)\./m.exec(nodeSh)?.[1])).toBeGreaterThanOrEqual(26);
  });

  it('the CLI on this Node prints the line exactly when this Node is older than the floor, and still runs', () => {
    const env = { ...process.env, RLVR_NO_RUNTIME_NOTE: undefined };
    const r = spawnSync(process.execPath, ['dist/cli/main.js', 'info'], { encoding: 'utf8', env });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^objectives:/);
    const old = Number(process.versions.node.split('.')[0]) < OLDEST_SUPPORTED_NODE;
    expect(r.stderr.split('\n').filter((l) => l.includes('is unsupported')).length).toBe(old ? 1 : 0);
  });

  it('a bad RLVR_CPU_FMA is refused in one line naming it, before anything runs', () => {
    const r = spawnSync(
      process.execPath,
      ['dist/cli/main.js', 'train', '--steps', '1', '--output', '/nonexistent/never'],
      {
        encoding: 'utf8',
        env: { ...process.env, RLVR_CPU_FMA: 'yes' },
      },
    );
    expect(r.status).toBe(2);
    const lines = r.stderr.split('\n').filter((l) => l !== '' && !l.includes('is unsupported'));
    expect(lines).toEqual(["rlvr: cpu: RLVR_CPU_FMA must be on, off or auto, got 'yes'"]);
  });

  it('the setup scripts parse', () => {
    for (const f of ['.ci/setup', '.ci/run', '.ci/node.sh']) expect(spawnSync('bash', ['-n', f]).status).toBe(0);
  });
});
