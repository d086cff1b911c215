import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { Rng } from '../../src/core/rng.js';
import { dispose } from '../../src/core/scope.js';
import { saveHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { tensor } from '../../src/ops/creation.js';
import { initParams, type TransformerConfig } from '../../src/nn/transformer.js';

/**
 * A Hub model directory small enough to build per test (milliseconds): a Qwen3-layout model over a byte-level
 * BPE tokenizer with no merges (each byte a token, ids 0..255, as GPT-2's byte-to-unicode table maps them) plus
 * three special tokens, and a chat template in Qwen's form. What the real Qwen3 tokenizer costs a second to build.
 */
export const TINY_HUB_CONFIG: TransformerConfig = {
  vocabSize: 259,
  dModel: 8,
  nLayers: 1,
  nHeads: 2,
  nKvHeads: 1,
  headDim: 4,
  dFf: 16,
  maxSeqLen: 64,
  ropeTheta: 1e6,
  rmsEps: 1e-6,
  qkNorm: true,
  tieEmbeddings: true,
};

export const SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;

export const CHAT_TEMPLATE =
  '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}' +
  '{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';

function bytesToUnicode(): [number, string][] {
  const bs: number[] = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return bs.map((b, i) => [b, String.fromCharCode(cs[i]!)]);
}

/** tokenizer.json's content (edit it to make a bad tokenizer). */
export function tinyTokenizerJson(): Record<string, unknown> & { model: Record<string, unknown> } {
  const vocab: Record<string, number> = {};
  for (const [b, c] of bytesToUnicode()) vocab[c] = b;
  const byteLevel = { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map((content, i) => ({
      id: 256 + i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges: [],
    },
  };
}

export interface TinyHubOptions {
  /** config.json fields to add or replace. */
  readonly config?: Readonly<Record<string, unknown>>;
  readonly tokenizer?: Record<string, unknown>;
  readonly tokenizerConfig?: Readonly<Record<string, unknown>>;
  /** A value to write at one weight (flat index 0 of the final norm), e.g. NaN. */
  readonly poison?: number;
  readonly parent?: string;
}

/** Write the tiny Hub directory; returns its path. */
export async function tinyHubDir(opts: TinyHubOptions = {}): Promise<string> {
  const dir = opts.parent ?? mkdtempSync(join(tmpdir(), 'rlvr-tinyhub-'));
  const cpu = new CpuBackend();
  const params = initParams(TINY_HUB_CONFIG, new Rng(4), { backend: cpu, std: 0.5 });
  const values = params.finalNorm.dataSync().slice();
  if (opts.poison !== undefined) values[0] = opts.poison;
  const poisoned =
    opts.poison === undefined
      ? params
      : { ...params, finalNorm: tensor(values, params.finalNorm.shape, { backend: cpu }) };
  const saved = await saveHfCheckpoint(dir, poisoned, TINY_HUB_CONFIG, {
    extraConfig: { eos_token_id: 258, bos_token_id: null, ...opts.config },
  })();
  if (E.isLeft(saved)) throw saved.left;
  dispose(params);
  if (poisoned !== params) dispose(poisoned.finalNorm);
  if (opts.config) {
    const path = join(dir, 'config.json');
    const json = JSON.parse(readFileSync(path, 'utf8'));
    writeFileSync(path, JSON.stringify({ ...json, ...opts.config }, null, 2));
  }
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(opts.tokenizer ?? tinyTokenizerJson()));
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({
      eos_token: '<|im_end|>',
      pad_token: '<|endoftext|>',
      chat_template: CHAT_TEMPLATE,
      ...opts.tokenizerConfig,
    }),
  );
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: 258 }));
  return dir;
}
