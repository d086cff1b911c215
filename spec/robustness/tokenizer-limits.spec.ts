import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { loadHfTokenizer, type HfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import { tinyHubDir, tinyTokenizerJson } from '../hf/tiny-hub.js';

/**
 * What a model directory's tokenizer files make the loader run is bounded in time: a chat template's renders
 * (each, and all of one tokenizer's together) and the regular expressions of tokenizer.json, which are timed
 * once at load. A hostile or careless file is refused, naming it, instead of stalling a run for minutes.
 */

const withTemplate = async (chat_template: string) =>
  await loadHfTokenizer(await tinyHubDir({ tokenizerConfig: { chat_template } }));

const loaded = (t: E.Either<Error, HfTokenizer>): HfTokenizer => {
  if (E.isLeft(t)) throw t.left;
  return t.right;
};

describe('a chat template cannot run past its time limit', () => {
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

describe('a regular expression of tokenizer.json is bounded', () => {
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
