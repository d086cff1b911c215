import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { loadHfTokenizer, type HfTokenizer } from '../../src/tokenizers/hf-tokenizer.js';
import { tinyHubDir } from '../hf/tiny-hub.js';

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
