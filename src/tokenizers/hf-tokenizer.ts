import { basename, join, readRegularFile } from '../platform/files.js';
import { fileErrorCause } from '../platform/errors.js';
import { spawnMessageThread } from '../platform/threads.js';
import * as E from 'fp-ts/lib/Either.js';
import * as Hub from '@huggingface/tokenizers';
import { Environment, Interpreter, Template } from '@huggingface/jinja';
import { RlvrError, jsonSyntaxDetail } from '../core/errors.js';
import type { Tokenizer } from '../tasks/tokenizer.js';

/**
 * A Hugging Face tokenizer (`tokenizer.json`: byte-level BPE as Qwen and Llama 3 ship it, with added and special
 * tokens) and its chat template (`tokenizer_config.json`'s `chat_template`, or `chat_template.jinja`), through
 * `@huggingface/tokenizers` and `@huggingface/jinja`, the libraries transformers.js runs on. The conformance spec
 * checks ids and chat renderings against transformers' own tokenizer.
 */
export class TokenizerLoadError extends RlvrError {
  constructor(
    /** The file's name (tokenizer.json, tokenizer_config.json, ...). */
    readonly file: string,
    /** The field at fault, or the file's name when the file as a whole is. */
    readonly field: string,
    detail: string,
    /** The file's whole path, when known (the message names it). */
    readonly path?: string,
  ) {
    super(`tokenizer: ${path ?? file}: ${field === file ? '' : `${field}: `}${detail}`);
  }
}

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | string;
  readonly content: string;
}

export interface HfTokenizerFiles {
  /** Parsed tokenizer.json. */
  readonly tokenizer: Record<string, unknown>;
  /** Parsed tokenizer_config.json (may be {}). */
  readonly config: Record<string, unknown>;
  /** chat_template.jinja, when the template lives in its own file. */
  readonly chatTemplate?: string;
  /** generation_config.json's eos_token_id (a number or a list): every id that ends generation. */
  readonly generationEos?: readonly number[];
}

/** A special token of tokenizer_config.json: a string, or { content } (older files). */
const tokenText = (v: unknown): string | null =>
  typeof v === 'string'
    ? v
    : typeof v === 'object' && v !== null && typeof (v as { content?: unknown }).content === 'string'
      ? (v as { content: string }).content
      : null;

export class HfTokenizer implements Tokenizer {
  readonly vocabSize: number;
  readonly bos: number | null;
  readonly eos: number;
  readonly pad: number;
  readonly stopIds: readonly number[];
  readonly chatTemplate: string | null;
  private readonly hub: Hub.Tokenizer;
  private readonly template: Template | null;
  private readonly specials: Record<string, string | null>;

  private readonly templateFile: string;
  private readonly renderTime: RenderTime = { spent: 0, renders: 0 };

  private constructor(
    files: HfTokenizerFiles,
    hub: Hub.Tokenizer,
    ids: { bos: number | null; eos: number; pad: number; stop: number[]; vocab: number },
    template: ChatTemplate | null,
  ) {
    this.hub = hub;
    this.vocabSize = ids.vocab;
    this.bos = ids.bos;
    this.eos = ids.eos;
    this.pad = ids.pad;
    this.stopIds = ids.stop;
    this.chatTemplate = template?.source ?? null;
    this.template = template?.compiled ?? null;
    this.templateFile = template?.file ?? 'tokenizer_config.json';
    this.specials = {
      bos_token: tokenText(files.config.bos_token),
      eos_token: tokenText(files.config.eos_token),
      pad_token: tokenText(files.config.pad_token),
    };
  }

  /** Build from parsed files; errors name the file and the field. */
  static fromFiles(files: HfTokenizerFiles): E.Either<TokenizerLoadError, HfTokenizer> {
    const model = checkModel(files.tokenizer);
    if (model) return E.left(model);
    let hub: Hub.Tokenizer;
    try {
      hub = new Hub.Tokenizer(files.tokenizer, files.config);
    } catch (e) {
      return E.left(
        new TokenizerLoadError(
          'tokenizer.json',
          'model',
          `not a tokenizer the library reads (${(e as Error).message})`,
        ),
      );
    }
    const idOf = (field: string): number | null | TokenizerLoadError => {
      const text = tokenText(files.config[field]);
      if (text === null) return null;
      const id = hub.token_to_id(text);
      return id === undefined
        ? new TokenizerLoadError(
            'tokenizer_config.json',
            field,
            `${JSON.stringify(text)} is not a token of tokenizer.json`,
          )
        : id;
    };
    const bos = idOf('bos_token');
    const eos = idOf('eos_token');
    const pad = idOf('pad_token');
    for (const x of [bos, eos, pad]) if (x instanceof TokenizerLoadError) return E.left(x);
    const stop = [...new Set([...(typeof eos === 'number' ? [eos] : []), ...(files.generationEos ?? [])])];
    if (stop.length === 0)
      return E.left(
        new TokenizerLoadError(
          'tokenizer_config.json',
          'eos_token',
          'no EOS token (and no eos_token_id in generation_config.json)',
        ),
      );
    const vocab = vocabSizeOf(files.tokenizer);
    const eosId = typeof eos === 'number' ? eos : stop[0]!;
    const template = compileTemplate(files);
    if (E.isLeft(template)) return template;
    const tok = new HfTokenizer(
      files,
      hub,
      { bos: bos as number | null, eos: eosId, pad: (pad as number | null) ?? eosId, stop, vocab },
      template.right,
    );
    // A tokenizer that loses text (characters its vocabulary cannot spell, with no fallback) is found at once.
    if (tok.encode(PROBE).length === 0)
      return E.left(
        new TokenizerLoadError('tokenizer.json', 'model', `encodes ${JSON.stringify(PROBE)} to no tokens at all`),
      );
    // A template that fails on a plain user turn fails every prompt: found now, naming its file.
    if (tok.template) {
      try {
        tok.renderChat([{ role: 'user', content: '12+34=' }]);
      } catch (e) {
        return E.left(e as TokenizerLoadError);
      }
    }
    return E.right(tok);
  }

  encode(text: string): number[] {
    return text.length === 0 ? [] : this.hub.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[], opts: { keepSpecial?: boolean } = {}): string {
    return ids.length === 0 ? '' : this.hub.decode([...ids], { skip_special_tokens: !opts.keepSpecial });
  }

  /** The chat template applied to `messages` (transformers' apply_chat_template with tokenize=False). */
  renderChat(
    messages: readonly ChatMessage[],
    opts: { addGenerationPrompt?: boolean; variables?: Readonly<Record<string, unknown>> } = {},
  ): string {
    if (!this.template)
      throw new TokenizerLoadError('tokenizer_config.json', 'chat_template', 'this tokenizer has no chat template');
    const template = this.template;
    const rendered = boundedRender(this.templateFile, this.renderTime, () =>
      template.render({
        ...this.specials,
        ...opts.variables,
        messages: messages.map((m) => ({ ...m })),
        add_generation_prompt: opts.addGenerationPrompt ?? true,
      }),
    );
    if (typeof rendered !== 'string')
      throw new TokenizerLoadError(this.templateFile, 'chat_template', 'does not render to text');
    return rendered;
  }

  /** With a chat template: the prompt as one user turn followed by the assistant's header; else [BOS?, ...prompt]. */
  promptIds(prompt: string): number[] {
    if (this.template) return this.encode(this.renderChat([{ role: 'user', content: prompt }]));
    return [...(this.bos === null ? [] : [this.bos]), ...this.encode(prompt)];
  }
}

const PROBE = '12+34= hello';

/** At most this many tokens (the model-size limit of nn/limits.ts). */
const MAX_VOCAB = 1_048_576;

/**
 * tokenizer.json's model, checked before the library reads it (which skips what it cannot use, silently): a
 * non-empty vocabulary of ids in range (a list of [piece, score] for Unigram), and for BPE merges that are a
 * list of pairs (`"a b"` or `["a", "b"]`) of vocabulary tokens whose concatenation is one too.
 */
function checkModel(tokenizer: Record<string, unknown>): TokenizerLoadError | null {
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
function vocabSizeOf(tokenizer: Record<string, unknown>): number {
  const vocab = (tokenizer.model as { vocab?: unknown } | undefined)?.vocab;
  const ids = typeof vocab === 'object' && vocab !== null ? Object.values(vocab as Record<string, unknown>) : [];
  const added = Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens.map((t: { id?: unknown }) => t?.id) : [];
  let max = -1;
  for (const id of [...ids, ...added]) if (typeof id === 'number' && id > max) max = id;
  return max + 1;
}

interface ChatTemplate {
  readonly source: string;
  readonly compiled: Template;
  /** Where it came from: chat_template.jinja or tokenizer_config.json. */
  readonly file: string;
}

/**
 * The chat template (chat_template.jinja, else tokenizer_config.json's `chat_template`: a string, or a list of
 * { name, template } with a `default`), parsed. Anything else there, or a template that does not parse, is the
 * model directory's fault: a `TokenizerLoadError` naming the file.
 */
function compileTemplate(files: HfTokenizerFiles): E.Either<TokenizerLoadError, ChatTemplate | null> {
  const file = files.chatTemplate !== undefined ? 'chat_template.jinja' : 'tokenizer_config.json';
  const bad = (detail: string): E.Either<TokenizerLoadError, never> =>
    E.left(new TokenizerLoadError(file, 'chat_template', detail));
  let source: string | null;
  if (files.chatTemplate !== undefined) source = files.chatTemplate;
  else {
    const t = files.config.chat_template;
    if (t === undefined || t === null) source = null;
    else if (typeof t === 'string') source = t;
    else if (Array.isArray(t)) {
      const named = t.find((x: { name?: unknown }) => x?.name === 'default') as { template?: unknown } | undefined;
      if (typeof named?.template !== 'string') return bad('is a list without a "default" template');
      source = named.template;
    } else return bad(`is ${describeValue(t)}, not a template (a string, or a list of { name, template })`);
  }
  if (source === null) return E.right(null);
  if (source.length > TEMPLATE_LIMITS.sourceChars)
    return bad(`is ${source.length} characters long, above the limit of ${TEMPLATE_LIMITS.sourceChars}`);
  try {
    return E.right({ source, compiled: new Template(source), file });
  } catch (e) {
    return bad(`does not parse: ${oneLine(e)}`);
  }
}

const describeValue = (v: unknown): string => (JSON.stringify(v) ?? String(v)).slice(0, 100);
const oneLine = (e: unknown): string => (e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 300);

/**
 * Bounds on rendering a chat template, which is code from the model directory: steps of the interpreter, wall
 * time, and the length of any string or list it builds (and so of its output). A real template renders a prompt
 * in well under a millisecond and a few thousand steps.
 *
 * Time is bounded twice: each render by `millis` (the clock is read at every step, and a list is at most `items`
 * long, so no one builtin, a `sort` say, runs long between two reads), and all the renders of one tokenizer
 * together by `millis` plus `millisPerRender` for each render (a template at 1 s a render, each under the limit,
 * otherwise turned a run rendering every prompt into minutes).
 */
export const TEMPLATE_LIMITS = {
  sourceChars: 1 << 20,
  steps: 2_000_000,
  millis: 2_000,
  millisPerRender: 10,
  length: 1 << 20,
  items: 1 << 16,
  range: 1 << 16,
} as const;

class TemplateLimitError extends Error {}

/** The budget of the render in progress (rendering is synchronous, so one at a time). */
let budget: { steps: number; deadline: number; why: string } | null = null;

// The interpreter's one entry for every node: counting there bounds steps and time; checking each value it
// returns bounds what a template can build (a string doubled in a loop). Only renders run by `boundedRender`
// are counted.
function tick(): void {
  const b = budget;
  if (b === null) return;
  if (++b.steps > TEMPLATE_LIMITS.steps)
    throw new TemplateLimitError(`took more than the limit of ${TEMPLATE_LIMITS.steps} steps`);
  if (performance.now() > b.deadline) throw new TemplateLimitError(b.why);
}
const evaluate = Interpreter.prototype.evaluate;
Interpreter.prototype.evaluate = function (this: Interpreter, ...args: Parameters<typeof evaluate>) {
  const b = budget;
  tick();
  const value = evaluate.apply(this, args);
  const inner = (value as { value?: unknown } | undefined)?.value;
  if (b !== null && typeof inner === 'string' && inner.length > TEMPLATE_LIMITS.length)
    throw new TemplateLimitError(
      `built a string of ${inner.length} characters, above the limit of ${TEMPLATE_LIMITS.length}`,
    );
  if (b !== null && Array.isArray(inner) && inner.length > TEMPLATE_LIMITS.items)
    throw new TemplateLimitError(`built a list of ${inner.length} items, above the limit of ${TEMPLATE_LIMITS.items}`);
  return value;
};

/** range() as Jinja's, refusing more than TEMPLATE_LIMITS.range numbers (the library's builds any array at once). */
function boundedRange(start: number, stop?: number, step = 1): number[] {
  const [from, to] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new Error('range() step must not be zero');
  const n = Math.max(0, Math.ceil((to - from) / step));
  if (!(n <= TEMPLATE_LIMITS.range))
    throw new TemplateLimitError(`range() of ${n} numbers is above the limit of ${TEMPLATE_LIMITS.range}`);
  return Array.from({ length: n }, (_, i) => from + i * step);
}

// The global range() of a render in progress is the bounded one (a template's own variable named range is left
// alone): the value the library makes of a JS function, taken from a scratch environment.
const boundedRangeValue = (() => {
  const scratch = new Environment();
  scratch.set('range', boundedRange);
  return scratch.lookupVariable('range');
})();
// A for loop sets its variables once per iteration, even when its body is empty: a step too.
const setVariable = Environment.prototype.setVariable;
Environment.prototype.setVariable = function (this: Environment, ...args: Parameters<typeof setVariable>) {
  tick();
  return setVariable.apply(this, args);
};
const lookupVariable = Environment.prototype.lookupVariable;
Environment.prototype.lookupVariable = function (this: Environment, name: string) {
  if (budget !== null && name === 'range') {
    try {
      const owner = (this as unknown as { resolve(n: string): { parent?: unknown } }).resolve(name);
      if (owner.parent === undefined) return boundedRangeValue;
    } catch {
      // not declared: the library's answer (undefined)
    }
  }
  return lookupVariable.call(this, name);
};

/** The time all the renders of one tokenizer have taken, against TEMPLATE_LIMITS' total. */
interface RenderTime {
  spent: number;
  renders: number;
}

/** Render within TEMPLATE_LIMITS; any failure (a limit, raise_exception, an error of the template) names the file. */
function boundedRender(file: string, total: RenderTime, render: () => unknown): unknown {
  const outer = budget;
  const start = performance.now();
  const left = TEMPLATE_LIMITS.millis + total.renders * TEMPLATE_LIMITS.millisPerRender - total.spent;
  budget =
    left < TEMPLATE_LIMITS.millis
      ? {
          steps: 0,
          deadline: start + left,
          why:
            `took ${Math.round(total.spent)} ms in ${total.renders} renders, above the limit of ` +
            `${TEMPLATE_LIMITS.millis} ms plus ${TEMPLATE_LIMITS.millisPerRender} ms a render`,
        }
      : {
          steps: 0,
          deadline: start + TEMPLATE_LIMITS.millis,
          why: `ran past the limit of ${TEMPLATE_LIMITS.millis} ms`,
        };
  try {
    return render();
  } catch (e) {
    const why = e instanceof TemplateLimitError ? `rendering ${e.message}` : `fails to render: ${oneLine(e)}`;
    throw new TokenizerLoadError(file, 'chat_template', why);
  } finally {
    budget = outer;
    total.spent += performance.now() - start;
    total.renders++;
  }
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

async function checkPatterns(tokenizer: Record<string, unknown>): Promise<TokenizerLoadError | null> {
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

const unreadable = (path: string, e: unknown): TokenizerLoadError => {
  const file = basename(path);
  return new TokenizerLoadError(file, file, fileErrorCause(e).cause, path);
};

async function readJson(
  dir: string,
  file: string,
  optional: boolean,
): Promise<E.Either<TokenizerLoadError, Record<string, unknown> | undefined>> {
  let text: string;
  try {
    text = await readRegularFile(join(dir, file), 'utf8');
  } catch (e) {
    if (optional && (e as NodeJS.ErrnoException).code === 'ENOENT') return E.right(undefined);
    return E.left(unreadable(join(dir, file), e));
  }
  return E.tryCatch(
    () => {
      const json = JSON.parse(text) as unknown;
      if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new Error('not a JSON object');
      return json as Record<string, unknown>;
    },
    (e) => new TokenizerLoadError(file, file, `not a valid JSON object (${jsonSyntaxDetail(e)})`, join(dir, file)),
  );
}

/** A model directory's tokenizer: tokenizer.json (required), tokenizer_config.json, generation_config.json. */
export async function loadHfTokenizer(dir: string): Promise<E.Either<TokenizerLoadError, HfTokenizer>> {
  const tokenizer = await readJson(dir, 'tokenizer.json', false);
  if (E.isLeft(tokenizer)) return tokenizer;
  const config = await readJson(dir, 'tokenizer_config.json', true);
  if (E.isLeft(config)) return config;
  const generation = await readJson(dir, 'generation_config.json', true);
  if (E.isLeft(generation)) return generation;
  const eos = generation.right?.eos_token_id;
  const generationEos: unknown[] = Array.isArray(eos) ? eos : eos === undefined || eos === null ? [] : [eos];
  if (!generationEos.every((x) => Number.isInteger(x) && (x as number) >= 0))
    return E.left(
      new TokenizerLoadError(
        'generation_config.json',
        'eos_token_id',
        `expected an id or a list of ids, got ${JSON.stringify(eos)}`,
      ),
    );
  const slow = await checkPatterns(tokenizer.right!);
  if (slow) return E.left(slow);
  let template: string | undefined;
  try {
    template = await readRegularFile(join(dir, 'chat_template.jinja'), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return E.left(unreadable(join(dir, 'chat_template.jinja'), e));
  }
  return HfTokenizer.fromFiles({
    tokenizer: tokenizer.right!,
    config: config.right ?? {},
    generationEos: generationEos as number[],
    ...(template === undefined ? {} : { chatTemplate: template }),
  });
}
