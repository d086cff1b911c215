import { RlvrError } from '../core/errors.js';

/**
 * What the policy, sampler and trainer need from a tokenizer. A character-level tokenizer implements it for the
 * built-in tasks; `HfTokenizer` (src/tokenizers/) implements it for Hugging Face checkpoints (byte-level BPE and
 * a chat template).
 */
export interface Tokenizer {
  readonly vocabSize: number;
  /** The id that starts a raw prompt, or null when the model has none (Qwen). */
  readonly bos: number | null;
  /** The id appended to a completion (the end of an assistant turn for chat models). */
  readonly eos: number;
  readonly pad: number;
  /** Every id that ends a sampled completion (eos included; generation_config.json may list several). */
  readonly stopIds: readonly number[];
  /** Token ids of `text`, without BOS or EOS. Throws a `TokenizerError` on text it cannot encode. */
  encode(text: string): number[];
  /** The text of `ids`; special tokens (BOS, EOS, PAD) are dropped unless `keepSpecial`. */
  decode(ids: readonly number[], opts?: { keepSpecial?: boolean }): string;
  /** The ids of a task prompt as the model is to see it: [BOS, ...prompt], or the chat template's rendering. */
  promptIds(prompt: string): number[];
}

export class TokenizerError extends RlvrError {
  constructor(
    readonly text: string,
    readonly position: number,
    detail: string,
  ) {
    super(`tokenizer: ${detail} at position ${position} of ${JSON.stringify(text)}`);
  }
}

/** Ids 0, 1, 2 are PAD, BOS and EOS in every CharTokenizer; symbols follow in the declared order. */
const SPECIALS = ['<pad>', '<bos>', '<eos>'] as const;

/**
 * A character-level tokenizer over a declared vocabulary. A symbol may be longer than one character (the
 * built-in tasks declare `\boxed{` as one symbol so a tiny model need not spell it out); encoding matches the
 * longest symbol at each position, so the result is unique.
 */
export class CharTokenizer implements Tokenizer {
  readonly pad = 0;
  readonly bos = 1;
  readonly eos = 2;
  readonly stopIds: readonly number[] = [2];
  readonly symbols: readonly string[];
  private readonly ids = new Map<string, number>();
  private readonly maxLen: number;
  /** The first characters of the symbols longer than one: elsewhere the longest match is the character itself. */
  private readonly starts = new Set<string>();

  constructor(symbols: readonly string[]) {
    const seen = new Set<string>();
    for (const s of symbols) {
      if (s.length === 0) throw new TokenizerError(s, 0, 'an empty symbol cannot be declared');
      if (seen.has(s)) throw new TokenizerError(s, 0, 'symbol declared twice');
      seen.add(s);
    }
    this.symbols = [...symbols];
    this.symbols.forEach((s, i) => this.ids.set(s, SPECIALS.length + i));
    this.maxLen = Math.max(1, ...symbols.map((s) => s.length));
    for (const s of symbols) if (s.length > 1) this.starts.add(s[0]!);
  }

  get vocabSize(): number {
    return SPECIALS.length + this.symbols.length;
  }

  encode(text: string): number[] {
    const out: number[] = [];
    let i = 0;
    while (i < text.length) {
      let matched = 0;
      const one = this.starts.has(text[i]!) ? undefined : this.ids.get(text[i]!);
      if (one !== undefined) {
        out.push(one);
        i++;
        continue;
      }
      for (let len = Math.min(this.maxLen, text.length - i); len >= 1; len--) {
        const id = this.ids.get(text.slice(i, i + len));
        if (id !== undefined) {
          out.push(id);
          matched = len;
          break;
        }
      }
      if (matched === 0)
        throw new TokenizerError(text, i, `character ${JSON.stringify(text[i])} is not in the vocabulary`);
      i += matched;
    }
    return out;
  }

  promptIds(prompt: string): number[] {
    return [this.bos, ...this.encode(prompt)];
  }

  decode(ids: readonly number[], opts: { keepSpecial?: boolean } = {}): string {
    let s = '';
    for (const id of ids) {
      if (id < SPECIALS.length) {
        if (opts.keepSpecial && id >= 0) s += SPECIALS[id];
        continue;
      }
      s += this.symbols[id - SPECIALS.length] ?? '';
    }
    return s;
  }
}
