import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliBundle, rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';

/**
 * The main job (`npm run example:addition`, and `rlvr train`) says what it is doing from its
 * first step, and its last line explains every number in it.
 */
const cli = cliBundle('main-job');
beforeAll(cli.build);
afterAll(cli.remove);
const FINAL =
  /^held-out pass@1 \(\d+ prompts\): after warm-start \d\.\d{3}, after RL \d\.\d{3} \(RL changed it by [+-]\d\.\d{3}\)/;

describe('the main job speaks from its first step', () => {
  it('rlvr train prints warm-start step 1, and a final line whose numbers are all named', () => {
    const r = rlvrSync(cli.path, ['train', ...withArgs(TINY_ARGS, { '--warm-start-steps': '30' })]);
    expect(r.status, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines.some((l) => /^warmstart 1\/30 /.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(FINAL);
    expect(lines.at(-1)).toMatch(/\)$/);
  }, 60_000);

  const mainJob = (output: string) =>
    spawnSync(
      join('node_modules', '.bin', 'vite-node'),
      [
        '--config',
        'vitest.config.ts',
        'examples/train-addition.ts',
        ...['--steps', '1', '--warm-start-steps', '3', '--eval-prompts', '4', '--output', output],
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );

  it('npm run example:addition prints its plan and warm-start step 1 first (it was silent for 50 steps)', () => {
    const output = mkdtempSync(join(tmpdir(), 'rlvr-main-job-'));
    try {
      const r = mainJob(output);
      expect(r.status, r.stderr).toBe(0);
      const lines = r.stdout
        .trim()
        .split('\n')
        .filter((l) => l.trim() !== '');
      expect(lines[0]).toMatch(/warm-start.*3 steps.*then 1 RL step/);
      expect(lines[1]).toMatch(/^warm-start 1\/3: loss \d/);
      expect(lines.at(-1)).toMatch(FINAL);
      expect(lines.at(-1)).toMatch(/in \d+ s of wall time$/);
      // The reward-and-pass@1 plot and the summary beside the metrics; a second run into the same
      // directory replaces them (it was refused: "holds curves.svg, summary.json, which a run does not write").
      expect(readdirSync(output)).toEqual(expect.arrayContaining(['metrics.jsonl', 'curves.svg', 'summary.json']));
      expect(readFileSync(join(output, 'curves.svg'), 'utf8')).toMatch(/^<svg[\s\S]*held-out pass@1[\s\S]*<\/svg>/);
      const again = mainJob(output);
      expect(again.status, again.stderr).toBe(0);
    } finally {
      rmSync(output, { recursive: true, force: true });
    }
  }, 240_000);
});
