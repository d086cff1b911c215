import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { InterruptedError } from '../../src/training/interrupted.js';
import { train } from '../../src/training/trainer.js';
import { loadHfTokenizer, type HfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import { tinyHubDir, tinyTokenizerJson } from '../hf/tiny-hub.js';

/** Issue 26 ("Hardening, round 3"), items 1-3 of this branch: chat templates, tokenizer regexes, signals in setup. */

const withTemplate = async (chat_template: string) =>
  await loadHfTokenizer(await tinyHubDir({ tokenizerConfig: { chat_template } }));

const loaded = (t: E.Either<Error, HfTokenizer>): HfTokenizer => {
  if (E.isLeft(t)) throw t.left;
  return t.right;
};

describe('issue 26 item 1: a chat template cannot run past its time limit', () => {
  it('a sort of a 1M-item list is refused at once (sorts of it ran 178 s, the clock read every 1024 steps)', async () => {
    const t0 = performance.now();
    const t = await withTemplate(
      `{% set a = range(62500) %}{% set l = ${Array(16).fill('a').join(' + ')} %}` +
        '{% for i in range(1000) %}{% set s = l|sort %}{% endfor %}{{ messages[0].content }}',
    );
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(E.isLeft(t) && t.left.message).toMatch(
      /chat_template: rendering built a list of 125000 items, above the limit/,
    );
  });

  it('a loop of sorts of the longest list allowed stops at the time limit', async () => {
    const t0 = performance.now();
    const t = await withTemplate(
      '{% set l = range(65536)|reverse %}{% for i in range(300) %}{% for j in range(300) %}{% set s = l|sort %}{% endfor %}{% endfor %}{{ messages[0].content }}',
    );
    expect(performance.now() - t0).toBeLessThan(4_000);
    expect(E.isLeft(t) && t.left.message).toMatch(/rendering ran past the limit of 2000 ms/);
  }, 30_000);

  it('the renders of one tokenizer share a total (each render at 100 ms, under the limit, was never stopped)', async () => {
    // About 100 ms a render (a few hundred thousand steps): fine once, far too slow for every prompt of a run.
    const tok = loaded(
      await withTemplate(
        '{% for i in range(300) %}{% for j in range(300) %}{% endfor %}{% endfor %}{{ messages[0].content }}',
      ),
    );
    const t0 = performance.now();
    let e: unknown = null;
    try {
      for (let i = 0; i < 200; i++) tok.promptIds(`prompt ${i}`);
    } catch (err) {
      e = err;
    }
    expect(performance.now() - t0).toBeLessThan(4_000);
    expect((e as Error | null)?.message).toMatch(
      /chat_template: rendering took \d+ ms in \d+ renders, above the limit of 2000 ms plus 10 ms a render/,
    );
  }, 30_000);

  it('a real template renders any number of prompts', async () => {
    const tok = loaded(await loadHfTokenizer(await tinyHubDir()));
    for (let i = 0; i < 5_000; i++) tok.promptIds(`prompt ${i}`);
  }, 30_000);
});

describe('issue 26 item 2: a regular expression of tokenizer.json is bounded', () => {
  const withSplit = async (pattern: string) => {
    const tokenizer = tinyTokenizerJson();
    tokenizer.pre_tokenizer = {
      type: 'Sequence',
      pretokenizers: [
        { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
        tokenizer.pre_tokenizer,
      ],
    };
    return await loadHfTokenizer(await tinyHubDir({ tokenizer }));
  };

  it('a pattern that backtracks without bound is refused at load, naming the file and the pattern (142 s)', async () => {
    const t0 = performance.now();
    const t = await withSplit('(?:.*?){20}\u0000');
    expect(performance.now() - t0).toBeLessThan(4_000);
    expect(E.isLeft(t) && t.left).toMatchObject({
      file: 'tokenizer.json',
      field: 'pre_tokenizer.pretokenizers[0].pattern.Regex',
    });
    expect(E.isLeft(t) && t.left.message).toMatch(/tokenizer\.json: .*\(\?:\.\*\?\)\{20\}.* takes more than 1000 ms/);
  }, 30_000);

  it("an exponential one too ((a+)+$ on a run of a's ending otherwise)", async () => {
    const t = await withSplit('(a+)+$');
    expect(E.isLeft(t) && t.left.message).toMatch(/takes more than/);
  }, 30_000);

  it("real patterns load (Llama 3's and Qwen's)", async () => {
    const llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    const qwen =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    for (const pattern of [llama3, qwen]) loaded(await withSplit(pattern));
  }, 30_000);
});

describe('issue 26 item 3: a signal stops the setup of a run, not only its steps', () => {
  it('an abort while every dataset row is rendered stops within a second or two (exit 5 came 99-123 s later)', async () => {
    const dir = await tinyHubDir();
    const data = join(mkdtempSync(join(tmpdir(), 'rlvr-r3c-')), 'rows.jsonl');
    // About 4 s of rendering and encoding every row's prompt, on one thread, before the first step.
    const rows: string[] = [];
    for (let i = 0; i < 30_000; i++) rows.push(JSON.stringify({ prompt: `${i}+1?`, answer: String(i + 1) }));
    writeFileSync(data, `${rows.join('\n')}\n`);
    const cfg = parseTrainArgs([
      ...['--model', dir, '--dataset', data, '--steps', '1', '--prompts-per-step', '2', '--num-generations', '2'],
      ...['--max-completion-length', '24', '--eval-prompts', '2', '--eval-k', '1'],
    ]);
    if (E.isLeft(cfg)) throw cfg.left;
    const controller = new AbortController();
    const t0 = performance.now();
    setTimeout(() => controller.abort('SIGTERM'), 500);
    const e = await train(cfg.right, { backend: new CpuBackend(), signal: controller.signal }).then(
      () => null,
      (err: unknown) => err,
    );
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(e).toBeInstanceOf(InterruptedError);
    expect(e).toMatchObject({ phase: 'setup', checkpoint: null });
    const { code, line } = describeFailure(e);
    expect(code).toBe(EXIT.interrupted);
    expect(line).toBe('interrupted by SIGTERM before the first step: nothing saved (no --output)');
  }, 30_000);
});
