import { basename, join, readRegularFile } from '../platform/files.js';
import { fileErrorCause } from '../platform/errors.js';
import * as E from 'fp-ts/lib/Either.js';
import * as Hub from '@huggingface/tokenizers';
import type { Template } from '@huggingface/jinja';
import { jsonSyntaxDetail } from '../core/errors.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { boundedRender, compileTemplate, type ChatTemplate, type RenderTime } from './chat-template.js';
import { TokenizerLoadError } from './errors.js';
import { checkModel, checkPatterns, vocabSizeOf } from './tokenizer-json.js';

// Re-exported where the trainer (training/pretrained.ts) and the CLI (cli/exit-codes.ts) import it from.
export { TokenizerLoadError } from './errors.js';

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

/**
 * A Hugging Face tokenizer (`tokenizer.json`: byte-level BPE as Qwen and Llama 3 ship it, with added and special
 * tokens) and its chat template (`tokenizer_config.json`'s `chat_template`, or `chat_template.jinja`), through
 * `@huggingface/tokenizers` and `@huggingface/jinja`, the libraries transformers.js runs on. The conformance spec
 * checks ids and chat renderings against transformers' own tokenizer. The files are checked before the library
 * reads them (tokenizer-json.ts) and the template is compiled and rendered within limits (chat-template.ts).
 */
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
