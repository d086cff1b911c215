import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { escapeControls } from '../../src/core/errors.js';
import { dispose } from '../../src/core/scope.js';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../src/nn/hf-checkpoint.js';
import { initParams } from '../../src/nn/transformer.js';
import { Rng } from '../../src/core/rng.js';
import { DatasetError } from '../../src/tasks/dataset.js';
import { invalidUtf8At, loadDatasetTask, readPretrained } from '../../src/training/pretrained.js';
import { loadHfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
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

describe('issue 26 item 2: invalid UTF-8 in a dataset is refused, not replaced by U+FFFD', () => {
  const row = (prompt: string, answer: string): string => `${JSON.stringify({ prompt, answer })}\n`;
  const write = (bytes: Buffer): string => {
    const path = join(tmp('utf8'), 'data.jsonl');
    writeFileSync(path, bytes);
    return path;
  };

  it('"caf\\xe9" is a DatasetError (exit 2) naming the file, line and byte offset', async () => {
    const first = Buffer.from(row('What is 1+1?', '2'));
    const bad = Buffer.concat([
      Buffer.from('{"prompt": "caf'),
      Buffer.from([0xe9]),
      Buffer.from('", "answer": "1"}\n'),
    ]);
    const path = write(Buffer.concat([first, bad, Buffer.from(row('What is 2+2?', '4'))]));
    const e = await loadDatasetTask(path).then(
      () => null,
      (err: unknown) => err,
    );
    expect(e).toBeInstanceOf(DatasetError);
    expect(e).toMatchObject({ file: path, line: 2, field: 'line' });
    const at = '{"prompt": "caf'.length;
    expect((e as Error).message).toContain(`byte offset ${at} of the line (${first.length + at} of the file)`);
    expect(describeFailure(e).code).toBe(EXIT.usage);
  });

  it('past a chunk boundary, and on a last line without a newline, the offsets still count from the file start', async () => {
    const filler = Buffer.from(row(`What is ${'x'.repeat(70_000)}?`, '1'));
    const bad = Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const path = write(Buffer.concat([filler, filler, bad]));
    await expect(loadDatasetTask(path)).rejects.toMatchObject({
      line: 3,
      message: expect.stringContaining(`byte offset 13 of the line (${2 * filler.length + 13} of the file)`),
    });
  });

  it('valid multi-byte text split across read chunks is read as it is', async () => {
    const rows: Buffer[] = [];
    for (let i = 0; i < 4000; i++) rows.push(Buffer.from(row(`Combien font ${i} + 1 ? café ☕ 𝟙`, String(i + 1))));
    const task = await loadDatasetTask(write(Buffer.concat(rows)));
    expect(task.rows).toHaveLength(4000);
    expect(task.rows.every((p) => p.prompt.includes('café ☕ 𝟙') && !p.prompt.includes('\ufffd'))).toBe(true);
  });

  it('invalidUtf8At agrees with a fatal TextDecoder on random bytes', () => {
    const rng = new Rng(26);
    const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
    for (let t = 0; t < 3000; t++) {
      const b = new Uint8Array(1 + rng.int(8));
      for (let i = 0; i < b.length; i++) b[i] = rng.int(4) === 0 ? rng.int(128) : 0x80 + rng.int(128);
      let valid = true;
      try {
        strict.decode(b);
      } catch {
        valid = false;
      }
      const at = invalidUtf8At(b);
      expect(at === -1, Buffer.from(b).toString('hex')).toBe(valid);
      if (!valid) expect(() => strict.decode(b.subarray(0, at))).not.toThrow();
    }
  });
});

describe('issue 26 item 3: messages quote no foreign file and print no control character', () => {
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
      const e = await loadDatasetTask('/proc/self/environ').then(
        () => null,
        (err: unknown) => err,
      );
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
