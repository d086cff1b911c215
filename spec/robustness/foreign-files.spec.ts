import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { escapeControls } from '../../src/core/errors.js';
import { Rng } from '../../src/core/rng.js';
import { dispose } from '../../src/core/scope.js';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { initParams } from '../../src/nn/transformer.js';
import { DatasetError } from '../../src/tasks/dataset.js';
import { loadHfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import { loadDatasetTask, readPretrained } from '../../src/training/pretrained.js';
import type { TrainWarning } from '../../src/training/run.js';
import { train } from '../../src/training/trainer.js';
import { TINY_HUB_CONFIG, tinyHubDir } from '../hf/tiny-hub.js';
import { rejectionOf, tempDir } from './helpers/harness.js';

/**
 * Files the user did not mean to hand over: a model directory's companions or configs that are links to files
 * outside it, a dataset linked elsewhere, names holding terminal escapes. Nothing of them is copied into an
 * export or quoted in a message, and what a message does quote is printed with its control characters escaped.
 */
const cpu = new CpuBackend();
const RUN = ['--steps', '1', '--prompts-per-step', '2', '--num-generations', '2', '--max-completion-length', '4'];
const EVAL = ['--eval-prompts', '2', '--eval-k', '1'];
const tmp = (name: string): string => tempDir(`foreign-${name}`);

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

describe('companion files that are links are not copied into the export', () => {
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

describe('messages quote no foreign file and print no control character', () => {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: what a message must not hold
  const RAW_CONTROL = /[\x00-\x1f\x7f-\x9f]/;
  const SECRET = 'SECRET-TOKEN-abcdef: not json at all';
  const secretFile = (): string => {
    const path = join(tmp('foreign'), 'secret.txt');
    writeFileSync(path, SECRET);
    return path;
  };
  /** The error a promise ends with: a rejection, or the Left of an Either it resolves to. */
  const messageOf = async (p: Promise<unknown>): Promise<string> => {
    const e = await p.then(
      (r) => {
        const either = r as { _tag?: string; left?: unknown };
        return either?._tag === 'Left' ? either.left : null;
      },
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(Error);
    return (e as Error).message;
  };

  it('escapeControls writes C0, DEL, C1 and bidi controls out, and is idempotent', () => {
    const s = escapeControls('a\x00b\x1b[2Jc\nd\x7fe\x9bf\u2028g\u202eh\\boxed{1}é☕');
    expect(s).toBe('a\\x00b\\x1b[2Jc\\x0ad\\x7fe\\x9bf\\u{2028}g\\u{202e}h\\boxed{1}é☕');
    expect(escapeControls(s)).toBe(s);
  });

  it('a tokenizer.json linked to another file is refused without quoting it (V8 quoted "SECRET-TOK")', async () => {
    const dir = await tinyHubDir();
    rmSync(join(dir, 'tokenizer.json'));
    symlinkSync(secretFile(), join(dir, 'tokenizer.json'));
    const m = await messageOf(loadHfTokenizer(dir));
    expect(m).toMatch(/tokenizer\.json.*not a valid JSON object \(Unexpected token\)/);
    expect(m).not.toMatch(/SECRET|abcdef/);
  });

  it.skipIf(!existsSync('/etc/passwd'))('a tokenizer.json linked to /etc/passwd does not print its lines', async () => {
    const dir = await tinyHubDir();
    rmSync(join(dir, 'tokenizer.json'));
    symlinkSync('/etc/passwd', join(dir, 'tokenizer.json'));
    const m = await messageOf(loadHfTokenizer(dir));
    expect(m).not.toContain(readFileSync('/etc/passwd', 'utf8').slice(0, 6));
  });

  it('a config.json or index linked elsewhere is refused without quoting it', async () => {
    const dir = await tinyHubDir();
    rmSync(join(dir, 'config.json'));
    symlinkSync(secretFile(), join(dir, 'config.json'));
    expect(await messageOf(loadHfCheckpoint(dir, cpu)())).not.toMatch(/SECRET|abcdef/);
    expect(await messageOf(readPretrained(dir))).not.toMatch(/SECRET|abcdef/);
    const other = await tinyHubDir();
    symlinkSync(secretFile(), join(other, 'model.safetensors.index.json'));
    expect(await messageOf(loadHfCheckpoint(other, cpu)())).not.toMatch(/SECRET|abcdef/);
  });

  it.skipIf(!existsSync('/proc/self/environ'))(
    '--dataset /proc/self/environ echoes none of the environment',
    async () => {
      const environ = readFileSync('/proc/self/environ', 'latin1');
      const e = await rejectionOf(loadDatasetTask('/proc/self/environ'));
      expect(e).toBeInstanceOf(DatasetError);
      expect(describeFailure(e).code).toBe(EXIT.usage);
      const m = (e as Error).message;
      expect(m).toMatch(/^dataset \/proc\/self\/environ:1: line is not JSON \(Unexpected token\)$/);
      for (const word of environ.split(/[\0=]/).filter((w) => w.length >= 4)) expect(m).not.toContain(word);
    },
  );

  it('a dataset linked to another file does not quote it; a dataset of the user quotes its line escaped', async () => {
    const linked = join(tmp('dslink'), 'data.jsonl');
    symlinkSync(secretFile(), linked);
    const m = await messageOf(loadDatasetTask(linked));
    expect(m).toMatch(/line is not JSON/);
    expect(m).not.toMatch(/SECRET|abcdef/);
    const own = join(tmp('dsown'), 'data.jsonl');
    writeFileSync(own, 'oops \x1b[31mred\x1b[0m\n');
    const mine = await messageOf(loadDatasetTask(own));
    expect(mine).toContain('oops'); // the user's own line may be quoted
    expect(mine).not.toMatch(RAW_CONTROL);
    // an answer the verifier cannot match is quoted from the user's file, not from a linked one
    const answer = join(tmp('dsans'), 'data.jsonl');
    writeFileSync(answer, `${JSON.stringify({ prompt: 'p', answer: 'SECRET{' })}\n`);
    expect(await messageOf(loadDatasetTask(answer))).toContain('"SECRET{"');
    const answerLink = join(tmp('dsanslink'), 'data.jsonl');
    symlinkSync(answer, answerLink);
    expect(await messageOf(loadDatasetTask(answerLink))).not.toContain('SECRET');
  });

  it('a weight_map shard name holding terminal escapes is printed escaped (exit 3)', async () => {
    const dir = await tinyHubDir();
    const evil = '\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil.safetensors';
    writeFileSync(
      join(dir, 'model.safetensors.index.json'),
      JSON.stringify({ weight_map: { 'model.embed_tokens.weight': evil } }),
    );
    const r = await loadHfCheckpoint(dir, cpu)();
    expect(E.isLeft(r)).toBe(true);
    const e = E.isLeft(r) ? r.left : null;
    expect(e!.message).not.toMatch(RAW_CONTROL);
    expect(e!.message).toContain('\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u{202e}evil.safetensors');
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.io);
    expect(line).not.toMatch(RAW_CONTROL);
  });

  it('the CLI prints a failure whose text holds controls (a system error path, an internal error) escaped', () => {
    const sys = Object.assign(new Error('ENOENT: no such file'), {
      code: 'ENOENT',
      syscall: 'open',
      path: '/tmp/\x1b[2Jx\x00y',
    });
    expect(describeFailure(sys).line).toBe('/tmp/\\x1b[2Jx\\x00y: no such file or directory (ENOENT)');
    expect(describeFailure(new TypeError('bad \x1b[31m')).line).not.toMatch(RAW_CONTROL);
  });
});
