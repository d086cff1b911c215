import * as Hub from '@huggingface/tokenizers';
import { spawnMessageThread } from '../platform/threads.js';
import { TokenizerLoadError } from './errors.js';

/**
 * tokenizer.json checked before `@huggingface/tokenizers` reads it (the library skips what it cannot use,
 * silently): its model (`checkModel`), its size (`vocabSizeOf`), and its regular expressions, timed in a worker
 * thread (`checkPatterns`). Each refusal is a `TokenizerLoadError` naming the field at fault.
 *
 * A vocabulary has at most MAX_VOCAB tokens (the model-size limit of io/limits.ts).
 */
const MAX_VOCAB = 1_048_576;

/**
 * tokenizer.json's model, checked before the library reads it (which skips what it cannot use, silently): a
 * non-empty vocabulary of ids in range (a list of [piece, score] for Unigram), and for BPE merges that are a
 * list of pairs (`"a b"` or `["a", "b"]`) of vocabulary tokens whose concatenation is one too.
 */
export function checkModel(tokenizer: Record<string, unknown>): TokenizerLoadError | null {
  const bad = (field: string, detail: string): TokenizerLoadError =>
    new TokenizerLoadError('tokenizer.json', field, detail);
  const model = tokenizer.model;
  if (typeof model !== 'object' || model === null || Array.isArray(model)) return bad('model', 'is not an object');
  const m = model as Record<string, unknown>;
  const vocab = m.vocab;
  if (m.type === 'Unigram') {
    if (!Array.isArray(vocab) || vocab.length === 0) return bad('model.vocab', 'is empty or not a list');
    if (vocab.length > MAX_VOCAB) return bad('model.vocab', `has ${vocab.length} tokens, above ${MAX_VOCAB}`);
    const i = vocab.findIndex((p) => !Array.isArray(p) || typeof p[0] !== 'string' || typeof p[1] !== 'number');
    return i < 0 ? null : bad(`model.vocab[${i}]`, 'is not a [piece, score] pair');
  }
  if (typeof vocab !== 'object' || vocab === null || Array.isArray(vocab))
    return bad('model.vocab', 'is not an object of tokens and ids');
  const entries = Object.entries(vocab as Record<string, unknown>);
  if (entries.length === 0) return bad('model.vocab', 'is empty: no text can be encoded');
  if (entries.length > MAX_VOCAB) return bad('model.vocab', `has ${entries.length} tokens, above ${MAX_VOCAB}`);
  const badId = entries.find(([, id]) => !(Number.isInteger(id) && (id as number) >= 0 && (id as number) < MAX_VOCAB));
  if (badId) return bad('model.vocab', `gives ${JSON.stringify(badId[0]).slice(0, 50)} the id ${String(badId[1])}`);
  if (m.type !== 'BPE' && m.merges === undefined) return null;
  const merges = m.merges ?? [];
  if (!Array.isArray(merges)) return bad('model.merges', 'is not a list');
  const has = (t: string): boolean => Object.hasOwn(vocab, t);
  for (let i = 0; i < merges.length; i++) {
    const e = merges[i] as unknown;
    const pair =
      typeof e === 'string'
        ? e.split(' ')
        : Array.isArray(e) && e.every((x) => typeof x === 'string')
          ? (e as string[])
          : null;
    const show = (JSON.stringify(e) ?? String(e)).slice(0, 60);
    if (pair === null || pair.length !== 2 || pair.some((x) => x === ''))
      return bad(`model.merges[${i}]`, `${show} is not a pair of tokens ("a b" or ["a", "b"])`);
    const missing = [pair[0]!, pair[1]!, pair[0]! + pair[1]!].find((t) => !has(t));
    if (missing !== undefined)
      return bad(
        `model.merges[${i}]`,
        `${show} needs ${JSON.stringify(missing).slice(0, 60)}, which is not in model.vocab`,
      );
  }
  return null;
}

/** One more than the largest id of the model's vocabulary and the added tokens. */
export function vocabSizeOf(tokenizer: Record<string, unknown>): number {
  const vocab = (tokenizer.model as { vocab?: unknown } | undefined)?.vocab;
  const ids = typeof vocab === 'object' && vocab !== null ? Object.values(vocab as Record<string, unknown>) : [];
  const added = Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens.map((t: { id?: unknown }) => t?.id) : [];
  let max = -1;
  for (const id of [...ids, ...added]) if (typeof id === 'number' && id > max) max = id;
  return max + 1;
}

/**
 * Every regular expression of tokenizer.json (a Split pre-tokenizer's, a Replace normalizer's or decoder's, every
 * `pattern: { Regex }`) is code from the model directory that the library runs on every text. A pattern that
 * backtracks without bound (`(?:.*?){20}\u0000` made a 1-step run take 142 s) cannot be stopped once running, nor
 * can a signal be heard meanwhile. The choice: rather than refuse a class of patterns by their shape (nested
 * quantifiers over what may match empty: a partial analysis of the library's own rewriting of Rust syntax), each
 * pattern, compiled as the library compiles it, is timed on adversarial probes (long runs of one character, mixed
 * text without the rare characters a pattern may end on, each with and without a stray end) in a worker thread
 * that is terminated past the budget. A pattern over it is refused, naming the file, the field and the pattern
 * (exit 3). Real patterns (GPT-2's, Llama 3's, Qwen's) take well under a millisecond a probe.
 */
export const PATTERN_LIMITS = { probeChars: 4096, millis: 1_000 } as const;

// The library's Split pre-tokenizer compiles a pattern as every part of it does (its types omit the export).
const { SplitPreTokenizer } = Hub as unknown as { SplitPreTokenizer: new (c: unknown) => { pattern: unknown } };

const PATTERN_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { chars } = workerData;
const bases = ['a', ' ', '0', '\\n', '\u00e9', '\u4e2d', 'Hello, world! 12+34= boxed{46} caf\u00e9\\t'];
const probes = [];
for (const b of bases) {
  const run = b.repeat(Math.ceil(chars / b.length)).slice(0, chars);
  probes.push(run, run + '!', '!' + run);
}
parentPort.on('message', ({ i, source, flags }) => {
  const re = new RegExp(source, flags);
  for (const p of probes) { re.lastIndex = 0; p.match(re); p.split(re); }
  parentPort.postMessage(i);
});
`;

/** The patterns of tokenizer.json with where they are ("pre_tokenizer.pretokenizers[1].pattern.Regex"). */
function patternsOf(json: unknown, at = ''): { field: string; source: string }[] {
  if (typeof json !== 'object' || json === null) return [];
  const out: { field: string; source: string }[] = [];
  const o = json as Record<string, unknown>;
  const regex = (o.pattern as { Regex?: unknown } | undefined)?.Regex;
  if (typeof regex === 'string') out.push({ field: `${at}pattern.Regex`, source: regex });
  for (const [k, v] of Object.entries(o)) {
    if (k === 'model' || k === 'added_tokens' || k === 'pattern') continue;
    out.push(...patternsOf(v, Array.isArray(o) ? `${at.slice(0, -1)}[${k}].` : `${at}${k}.`));
  }
  return out;
}

export async function checkPatterns(tokenizer: Record<string, unknown>): Promise<TokenizerLoadError | null> {
  const compiled: { field: string; source: string; re: RegExp }[] = [];
  for (const p of patternsOf(tokenizer)) {
    let re: unknown;
    try {
      re = new SplitPreTokenizer({ pattern: { Regex: p.source } }).pattern;
    } catch {
      continue; // not a pattern the library compiles: its own error, when it reads the file
    }
    if (re instanceof RegExp) compiled.push({ ...p, re });
  }
  if (compiled.length === 0) return null;
  const worker = spawnMessageThread(PATTERN_WORKER, { chars: PATTERN_LIMITS.probeChars });
  try {
    for (const [i, p] of compiled.entries()) {
      const ok = await new Promise<boolean>((resolve) => {
        const done = (verdict: boolean): void => {
          clearTimeout(timer);
          worker.off('message', answered);
          worker.off('error', failed);
          resolve(verdict);
        };
        const answered = (): void => done(true);
        const failed = (): void => done(true); // a worker that fails is no verdict on the pattern
        const timer = setTimeout(() => done(false), PATTERN_LIMITS.millis);
        worker.on('message', answered);
        worker.on('error', failed);
        worker.postMessage({ i, source: p.re.source, flags: p.re.flags });
      });
      if (!ok)
        return new TokenizerLoadError(
          'tokenizer.json',
          p.field,
          `${JSON.stringify(p.source).slice(0, 200)} takes more than ${PATTERN_LIMITS.millis} ms on a probe of ` +
            `${PATTERN_LIMITS.probeChars} characters (a regular expression that backtracks without bound)`,
        );
    }
    return null;
  } finally {
    await worker.terminate();
  }
}
