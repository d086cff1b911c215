import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CheckpointError } from '../../src/io/safetensors.js';
import { FileSystemError } from '../../src/platform/errors.js';
import { cliBundle } from './helpers/cli.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { TrainConfigError } from '../../src/training/config.js';
import { DivergedError } from '../../src/training/divergence.js';
import { TRAIN_USAGE } from '../../src/cli/args.js';

/**
 * Failures at the command line: one line per failure, no stack trace, one exit-status convention
 * (documented in --help). Two real processes (the bundled CLI, ~1 s each); the rest through the same
 * mapping in process.
 */
const TINY = [
  '--warm-start-steps',
  '2',
  '--steps',
  '1',
  '--eval-prompts',
  '4',
  '--prompts-per-step',
  '2',
  '--num-generations',
  '2',
  '--warm-start-batch-size',
  '4',
  '--d-model',
  '16',
  '--n-layers',
  '1',
  '--n-heads',
  '2',
  '--n-kv-heads',
  '2',
  '--max-completion-length',
  '6',
];
// The CLI bundled as `npm run rlvr` bundles it, under node_modules so its packages resolve.
const cli = cliBundle('main');
const bundle = cli.path;
beforeAll(cli.build);
afterAll(cli.remove);
const rlvr = (args: string[]): { status: number | null; stderr: string; stdout: string } => {
  const r = spawnSync(process.execPath, [bundle, 'train', ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stderr: r.stderr, stdout: r.stdout };
};
const noStack = (text: string): void => expect(text).not.toMatch(/^\s+at /m);

describe('the CLI: one line, no stack, documented exit status', () => {
  it('--output under /sys (an fs error) is one line naming the path and cause, exit 3 (it printed a stack)', () => {
    const r = rlvr([...TINY, '--output', '/sys/rlvr-robustness-test']);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^rlvr: \/sys\/rlvr-robustness-test: .*\((EPERM|EACCES|EROFS|ENOENT)\)/);
    noStack(r.stderr);
    expect(r.status).toBe(EXIT.io);
  }, 60_000);

  it('a diverging learning rate ends with exit 4 naming the step and the metric (it exited 0)', () => {
    const out = mkdtempSync(join(tmpdir(), 'rlvr-cli-div-'));
    const r = rlvr([...TINY, '--warm-start-learning-rate', '1e10', '--output', join(out, 'run')]);
    expect(r.stderr).toMatch(/^rlvr: training diverged: (loss|grad_norm) = (NaN|-?Infinity) at warmstart step \d+/);
    noStack(r.stderr);
    expect(r.status).toBe(EXIT.diverged);
  }, 60_000);

  it('maps every kind of failure to its status and one line; --help documents the statuses', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rlvr-cli-'));
    writeFileSync(join(dir, 'f'), '');
    const cases: [unknown, number][] = [
      [new TrainConfigError('model.dModel', 1e6, 'is above the limit of 16384'), EXIT.usage],
      [new DivergedError('rl', 3, 'loss', Number.NaN), EXIT.diverged],
      [new CheckpointError('corrupt', 'model.safetensors', 'differs from the manifest'), EXIT.io],
      [
        FileSystemError.from(join(dir, 'f'), Object.assign(new Error('EACCES: permission denied'), { code: 'EACCES' })),
        EXIT.io,
      ],
      [
        Object.assign(new Error("ENOTDIR: not a directory, mkdir '/x/y'"), {
          code: 'ENOTDIR',
          syscall: 'mkdir',
          path: '/x/y',
        }),
        EXIT.io,
      ],
      [new TypeError('x is undefined\n    at f (file.ts:1:1)'), EXIT.internal],
    ];
    for (const [e, code] of cases) {
      const d = describeFailure(e);
      expect(d.code).toBe(code);
      expect(d.line.split('\n')).toHaveLength(1);
    }
    expect(describeFailure(cases[4]![0]).line).toBe('/x/y: a component of the path is not a directory (ENOTDIR)');
    for (const code of Object.values(EXIT)) expect(TRAIN_USAGE).toMatch(new RegExp(`^  ${code}  `, 'm'));
  });
});
