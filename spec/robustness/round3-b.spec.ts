import { existsSync, mkdirSync, mkdtempSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { dispose } from '../../src/core/scope.js';
import { saveHfCheckpoint } from '../../src/nn/hf-checkpoint.js';
import { initParams } from '../../src/nn/transformer.js';
import { Rng } from '../../src/core/rng.js';
import type { TrainWarning } from '../../src/training/run.js';
import { train } from '../../src/training/trainer.js';
import { TINY_HUB_CONFIG, tinyHubDir } from '../hf/tiny-hub.js';

/** Issue 26, hardening round 3 (items 1 to 3 of this branch). */
const cpu = new CpuBackend();
const RUN = ['--steps', '1', '--prompts-per-step', '2', '--num-generations', '2', '--max-completion-length', '4'];
const EVAL = ['--eval-prompts', '2', '--eval-k', '1'];
const tmp = (prefix: string): string => mkdtempSync(join(tmpdir(), `rlvr-r3b-${prefix}-`));

afterEach(() => {
  vi.restoreAllMocks();
});

/** A model directory whose merges.txt links to a secret outside it, and whose vocab.json is a directory. */
async function hostileCompanions(): Promise<{ dir: string; secret: string }> {
  const dir = await tinyHubDir();
  const secret = join(tmp('secret'), 'secret');
  writeFileSync(secret, 'PRIVATE KEY 1234\n');
  symlinkSync(secret, join(dir, 'merges.txt'));
  mkdirSync(join(dir, 'vocab.json'));
  writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages[0].content }}'); // a regular companion, copied
  return { dir, secret };
}

describe('issue 26 item 1: companion files that are links are not copied into the export', () => {
  it('saveHfCheckpoint copies regular companions only and names the rest', async () => {
    const { dir } = await hostileCompanions();
    const out = join(tmp('save'), 'model');
    const params = initParams(TINY_HUB_CONFIG, new Rng(1), { backend: cpu, std: 0.5 });
    const r = await saveHfCheckpoint(out, params, TINY_HUB_CONFIG, { companionsFrom: dir })();
    dispose(params);
    if (E.isLeft(r)) throw r.left;
    expect(r.right.skippedCompanions).toEqual(['vocab.json', 'merges.txt']);
    expect(existsSync(join(out, 'merges.txt'))).toBe(false);
    expect(existsSync(join(out, 'vocab.json'))).toBe(false);
    expect(readdirSync(out)).toContain('chat_template.jinja');
    expect(readdirSync(out)).toContain('tokenizer.json');
  });

  it('a run with --model M --output O leaves the secret out and warns naming the files', async () => {
    const { dir } = await hostileCompanions();
    const out = join(tmp('run'), 'run');
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--output', out]);
    if (E.isLeft(cfg)) throw cfg.left;
    const warnings: TrainWarning[] = [];
    dispose((await train(cfg.right, { backend: cpu, onWarning: (w) => warnings.push(w) })).params);
    expect(existsSync(join(out, 'model', 'merges.txt'))).toBe(false);
    expect(existsSync(join(out, 'model', 'vocab.json'))).toBe(false);
    const skipped = warnings.filter((w) => w.kind === 'skipped-companions');
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.files).toEqual(['vocab.json', 'merges.txt']);
    expect(skipped[0]!.message).toMatch(/without vocab\.json, merges\.txt/);
  });

  it('without onWarning (the CLI) the warning is printed', async () => {
    const { dir } = await hostileCompanions();
    const out = join(tmp('cli'), 'run');
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--output', out]);
    if (E.isLeft(cfg)) throw cfg.left;
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    dispose((await train(cfg.right, { backend: cpu })).params);
    const lines = warn.mock.calls.map((c) => String(c[0]));
    expect(lines.some((l) => /^warning: .*merges\.txt.*not a regular file/.test(l))).toBe(true);
    expect(existsSync(join(out, 'model', 'merges.txt'))).toBe(false);
  });
});
