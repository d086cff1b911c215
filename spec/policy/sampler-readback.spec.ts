import { describe, expect, it } from 'vitest';
import { readBackBytes, type Backend } from '../../src/core/backend.js';
import { Rng } from '../../src/core/rng.js';
import { dispose } from '../../src/core/scope.js';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { ReferenceBackend } from '../../src/backends/reference/index.js';
import { initParams } from '../../src/nn/transformer.js';
import { sampleRollouts } from '../../src/rl/sampler.js';
import type { Tokenizer } from '../../src/tasks/tokenizer.js';
import { tinyConfig, tokenizer } from './helpers/fixtures.js';

/**
 * The sampler picks tokens where the log-probs are (`sampleTokens`) and reads back only each row's id and its
 * log-prob: the bytes read back per generated token do not grow with the vocabulary. Its draws: one uniform per
 * unfinished row and token, none when greedy.
 */

/** The fixtures' tokenizer with a vocabulary of `vocab` ids and no stop id (every row runs maxNewTokens). */
const wideTokenizer = (vocab: number): Tokenizer => ({
  vocabSize: vocab,
  bos: tokenizer.bos,
  pad: tokenizer.pad,
  eos: -1,
  stopIds: [],
  encode: (text) => tokenizer.encode(text),
  decode: (ids, opts) =>
    tokenizer.decode(
      ids.filter((id) => id < tokenizer.vocabSize),
      opts,
    ),
  promptIds: (prompt) => tokenizer.promptIds(prompt),
});

const PROMPTS = ['12+34=', '7*8='];
const G = 3;
const NEW = 6;

async function bytesPerToken(backend: Backend, vocab: number, temperature: number, topP: number): Promise<number> {
  const config = tinyConfig({ vocabSize: vocab });
  const params = initParams(config, new Rng(1), { backend, std: 0.5 });
  const before = readBackBytes(backend);
  const ro = await sampleRollouts(params, config, wideTokenizer(vocab), PROMPTS, new Rng(2), {
    groupSize: G,
    maxNewTokens: NEW,
    temperature,
    topP,
  });
  const bytes = readBackBytes(backend) - before;
  dispose(params);
  expect(ro.completionLen).toBe(NEW);
  return bytes / NEW;
}

describe('sampler read-back', () => {
  const rows = PROMPTS.length * G;
  it.each([
    ['cpu', 1, 1],
    ['cpu', 0.7, 0.9],
    ['cpu', 0, 1],
    ['reference', 1, 0.5],
  ] as const)('%s, temperature %f, topP %f: the same bytes per token at V = 64 and V = 4096', async (name, t, topP) => {
    const backend = name === 'cpu' ? new CpuBackend({ threads: 1 }) : new ReferenceBackend();
    const small = await bytesPerToken(backend, 64, t, topP);
    const large = await bytesPerToken(backend, 4096, t, topP);
    expect(large).toBe(small);
    // Reading the [B, V] log-probs back, as before, would be B V 4 bytes a token, 98,304 at V = 4096.
    expect(small).toBeLessThan(rows * 64 * 4);
    backend.dispose();
  });

  it('draws one uniform per unfinished row and token, none when greedy', async () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(3), { std: 0.5 });
    const rng = new Rng(4);
    const ro = await sampleRollouts(params, config, tokenizer, PROMPTS, rng, { groupSize: 4, maxNewTokens: 10 });
    const drawn = ro.completionLengths.reduce((s, n) => s + n, 0);
    expect(ro.finished.some(Boolean)).toBe(true); // finished rows draw no more, so this count means something
    const expected = new Rng(4);
    for (let i = 0; i < drawn; i++) expected.uniform();
    expect(rng.state()).toEqual(expected.state());
    const greedyRng = new Rng(5);
    await sampleRollouts(params, config, tokenizer, PROMPTS, greedyRng, { maxNewTokens: 10, temperature: 0 });
    expect(greedyRng.state()).toEqual(new Rng(5).state());
    dispose(params);
  });
});
