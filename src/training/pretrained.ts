import { writePlainDirAtomic } from '../io/atomic-dir.js';
import { FileSystemError } from '../platform/errors.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import { isDirectFile, join, openRegular, readRegularFile } from '../platform/files.js';
import * as E from 'fp-ts/lib/Either.js';
import type { Backend } from '../core/backend.js';
import { Rng } from '../core/rng.js';
import { CheckpointError } from '../io/safetensors.js';
import { fromHfConfig } from '../io/hf-config.js';
import {
  COMPANION_FILES,
  fileError,
  HF_FILES,
  loadHfCheckpoint,
  saveHfCheckpoint,
  type HfSaveResult,
} from '../io/hf-checkpoint.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import {
  DatasetError,
  datasetTask,
  parseDatasetLine,
  type DatasetProblem,
  type DatasetTask,
} from '../tasks/dataset.js';
import { splitOf, type Problem, type Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { loadHfTokenizer, TokenizerLoadError, type HfTokenizer } from '../tokenizers/hf-tokenizer.js';
import { TrainConfigError, type TrainConfig } from './config.js';
import { InterruptedError, setupPoll } from './interrupted.js';

/**
 * Starting RL from a Hugging Face model directory (`--model DIR`): its config and tokenizer are read first (so
 * the memory estimate comes before any weight is allocated), then the weights are streamed to the backend. The
 * trained policy is written back as a Hub directory with the tokenizer files beside it.
 */
export interface PretrainedParts {
  readonly dir: string;
  readonly config: TransformerConfig;
  readonly tokenizer: HfTokenizer;
  /** config.json's token ids, kept when the trained model is saved. */
  readonly extraConfig: Readonly<Record<string, unknown>>;
  /** Bytes per weight as config.json says they are stored (`torch_dtype`/`dtype`: 2 for bf16/f16, else 4). */
  readonly storedBytesPerParameter: number;
}

/** Read config.json and the tokenizer of a model directory (no weights yet). */
export async function readPretrained(dir: string): Promise<PretrainedParts> {
  let text: string;
  try {
    text = await readRegularFile(join(dir, HF_FILES.config), 'utf8');
  } catch (e) {
    throw fileError(join(dir, HF_FILES.config), e);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new CheckpointError(
      'bad-config',
      HF_FILES.config,
      `not valid JSON (${jsonSyntaxDetail(e)})`,
      HF_FILES.config,
    );
  }
  const config = fromHfConfig(json, HF_FILES.config);
  if (E.isLeft(config)) throw config.left;
  const tokenizer = await loadHfTokenizer(dir);
  if (E.isLeft(tokenizer)) throw tokenizer.left;
  const tok = tokenizer.right;
  if (tok.vocabSize > config.right.vocabSize) {
    throw new TokenizerLoadError(
      'tokenizer.json',
      'vocab',
      `has ids up to ${tok.vocabSize - 1}, but config.json's vocab_size is ${config.right.vocabSize}`,
      join(dir, 'tokenizer.json'),
    );
  }
  const j = json as Record<string, unknown>;
  const extraConfig = Object.fromEntries(
    ['bos_token_id', 'eos_token_id', 'pad_token_id'].filter((k) => j[k] !== undefined).map((k) => [k, j[k]]),
  );
  const stored = j.torch_dtype ?? j.dtype;
  const storedBytesPerParameter = stored === 'bfloat16' || stored === 'float16' ? 2 : 4;
  return { dir, config: config.right, tokenizer: tok, extraConfig, storedBytesPerParameter };
}

export async function loadPretrainedParams(
  parts: PretrainedParts,
  backend: Backend,
  opts: { allowNonFinite?: boolean; keepDType?: boolean } = {},
): Promise<TransformerParams> {
  const model = await loadHfCheckpoint(parts.dir, backend, {
    allowNonFinite: opts.allowNonFinite ?? false,
    keepDType: opts.keepDType ?? false,
  })();
  if (E.isLeft(model)) throw model.left;
  return model.right.params;
}

/**
 * Write the policy as a Hub directory (weights, config, the source directory's tokenizer and generation files).
 * Returns what the save left out or changed: the companion files not copied because they are not regular files of
 * the source (a symbolic link, ...), and in bf16 the tensors whose finite values past its range were saturated.
 */
export async function savePretrained(
  dir: string,
  params: TransformerParams,
  parts: PretrainedParts,
  dtype: 'f32' | 'bf16',
): Promise<HfSaveResult> {
  let saved: HfSaveResult = { skippedCompanions: [], saturated: [] };
  // A plain directory (cp -r copies it as it is), whole or not at all: written beside, then renamed into place.
  await writePlainDirAtomic(dir, async (tmp) => {
    const res = await saveHfCheckpoint(tmp, params, parts.config, {
      dtype,
      extraConfig: parts.extraConfig,
      companionsFrom: parts.dir,
    })();
    if (E.isLeft(res)) throw res.left;
    saved = res.right;
  });
  return saved;
}

export { COMPANION_FILES };

/** Limits on a dataset file: a row's bytes (a prompt far beyond any model's context) and the number of rows. */
export const DATASET_LIMITS = { lineBytes: 1 << 20, rows: 1 << 22 } as const;

/** The offset of the first byte of `b` that does not begin a well-formed UTF-8 sequence (WHATWG), or -1. */
export function invalidUtf8At(b: Uint8Array): number {
  for (let i = 0; i < b.length; ) {
    const c = b[i]!;
    if (c < 0x80) {
      i++;
      continue;
    }
    const n = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
    if (n === 0) return i;
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const lo = c === 0xe0 ? 0xa0 : c === 0xf0 ? 0x90 : 0x80;
    const hi = c === 0xed ? 0x9f : c === 0xf4 ? 0x8f : 0xbf;
    for (let k = 1; k <= n; k++) {
      const d = b[i + k];
      if (d === undefined || d < (k === 1 ? lo : 0x80) || d > (k === 1 ? hi : 0xbf)) return i;
    }
    i += n + 1;
  }
  return -1;
}

/**
 * Read a JSON-lines file a chunk at a time, handing each line (with its number) to `use`; memory stays bounded by
 * the longest line allowed: a longer one is refused as soon as it passes the limit, without being held whole.
 * Each line is decoded as strict UTF-8: a byte that is not (Latin-1 "caf\xe9", say) is `invalid(line, offset in
 * the line, offset in the file)`, never replaced by U+FFFD and trained on.
 */
async function forEachLine(
  path: string,
  use: (text: string, line: number) => void,
  tooLong: (line: number) => Error,
  invalid: (line: number, at: number, fileAt: number) => Error,
  poll: () => Promise<void> = async () => {},
): Promise<void> {
  const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  const decode = (bytes: Buffer, line: number, lineStart: number): string => {
    try {
      return utf8.decode(bytes);
    } catch {
      const at = invalidUtf8At(bytes);
      throw invalid(line, at, lineStart + at);
    }
  };
  const h = await openRegular(path);
  try {
    const chunk = Buffer.alloc(1 << 16);
    let parts: Buffer[] = [];
    let held = 0;
    let line = 1;
    let position = 0;
    let lineStart = 0;
    for (;;) {
      const { bytesRead } = await h.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      const chunkStart = position;
      position += bytesRead;
      let start = 0;
      for (let nl = chunk.indexOf(0x0a, 0); nl >= 0 && nl < bytesRead; nl = chunk.indexOf(0x0a, start)) {
        if (held + nl - start > DATASET_LIMITS.lineBytes) throw tooLong(line);
        parts.push(Buffer.from(chunk.subarray(start, nl)));
        use(decode(Buffer.concat(parts), line, lineStart), line++);
        await poll();
        parts = [];
        held = 0;
        start = nl + 1;
        lineStart = chunkStart + start;
      }
      held += bytesRead - start;
      if (held > DATASET_LIMITS.lineBytes) throw tooLong(line);
      parts.push(Buffer.from(chunk.subarray(start, bytesRead)));
    }
    if (held > 0) use(decode(Buffer.concat(parts), line, lineStart), line);
  } finally {
    await h.close();
  }
}

/** A JSON-lines dataset file as a task (prompt, answer; the \boxed{} verifier), read streaming, row by row. */
export async function loadDatasetTask(path: string, signal?: AbortSignal): Promise<DatasetTask> {
  const problems: DatasetProblem[] = [];
  const tooLong = (line: number): DatasetError =>
    new DatasetError(path, line, 'line', `is longer than ${DATASET_LIMITS.lineBytes} bytes (the limit of a row)`);
  // A line that fails to parse is quoted only from a file the path names directly: not through a link to
  // elsewhere, not /proc/self/environ (whose "line" is the environment).
  const quote = await isDirectFile(path);
  try {
    await forEachLine(
      path,
      (text, line) => {
        const p = parseDatasetLine(text, path, line, quote);
        if (E.isLeft(p)) throw p.left;
        if (!p.right) return;
        if (problems.length >= DATASET_LIMITS.rows)
          throw new DatasetError(path, line, 'file', `has more than ${DATASET_LIMITS.rows} rows (the limit)`);
        problems.push(p.right);
      },
      tooLong,
      (line, at, fileAt) =>
        new DatasetError(
          path,
          line,
          'line',
          `is not valid UTF-8: byte offset ${at} of the line (${fileAt} of the file)`,
        ),
      setupPoll(signal),
    );
  } catch (e) {
    if (e instanceof DatasetError || e instanceof InterruptedError) throw e;
    throw FileSystemError.from(path, e);
  }
  if (problems.length === 0) throw new DatasetError(path, 0, 'file', 'has no rows');
  // Training and evaluation draw from the hash split of the prompts: both sides need a row.
  for (const split of ['train', 'test'] as const) {
    if (!problems.some((p) => splitOf(p.prompt) === split)) {
      throw new TrainConfigError(
        'dataset',
        path,
        `has no ${split === 'test' ? 'held-out' : 'training'} row ` +
          '(10% of prompts are held out by a hash of the prompt): add rows',
      );
    }
  }
  return datasetTask(problems, 'dataset', path);
}

/**
 * Every row of a dataset against the model, before anything trains: its prompt (as the model sees it) plus the
 * completion budget fits the model's positions (sampling), and its worked answer fits the completion budget (RL)
 * and, after the prompt, the positions (warm-start). The first row that does not is a `DatasetError` naming the
 * file and line.
 */
export async function checkDatasetRows(
  task: Task<Problem>,
  tokenizer: Tokenizer,
  maxSeqLen: number,
  cfg: Pick<TrainConfig, 'maxCompletionLength' | 'warmStartSteps'>,
  signal?: AbortSignal,
): Promise<void> {
  const rows = (task as Partial<DatasetTask>).rows;
  if (!rows) return;
  const file = (task as DatasetTask).file ?? 'dataset';
  const poll = setupPoll(signal);
  for (const [i, p] of rows.entries()) {
    await poll();
    const line = (p as Partial<DatasetProblem>).line ?? i + 1;
    const prompt = tokenizer.promptIds(p.prompt).length;
    if (prompt + cfg.maxCompletionLength > maxSeqLen)
      throw new DatasetError(
        file,
        line,
        'prompt',
        `is ${prompt} tokens: with --max-completion-length ${cfg.maxCompletionLength} it does not fit the model's ` +
          `${maxSeqLen} positions`,
      );
    const answer = tokenizer.encode(task.workedSolution(p)).length + 1; // and EOS
    if (answer > cfg.maxCompletionLength)
      throw new DatasetError(
        file,
        line,
        'answer',
        `needs ${answer} tokens (\\boxed{answer} and EOS), more than --max-completion-length ${cfg.maxCompletionLength}: ` +
          'the model could never write it',
      );
  }
}

const shown = (text: string): string => JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}...` : text);

/**
 * Whether a Hub tokenizer can carry the task: each of 32 sampled prompts and its worked answer encodes to tokens
 * (ids within the model's vocabulary) that decode back to the same text, and the prompt's chat rendering too. A
 * tokenizer that drops characters would train on a question the model never sees, or on an answer it can never
 * write. Refused as the model directory's fault (a `TokenizerLoadError`, exit 3) naming the text.
 */
export function checkTokenizerCarries(
  tokenizer: Tokenizer,
  vocabSize: number,
  task: Task<Problem>,
  seed: number,
  file = 'tokenizer.json',
): void {
  const fail = (detail: string): never => {
    throw new TokenizerLoadError(file, 'model', detail);
  };
  const inRange = (ids: readonly number[], what: string): void => {
    const bad = ids.find((id) => !(Number.isInteger(id) && id >= 0 && id < vocabSize));
    if (bad !== undefined) fail(`gives ${what} the id ${bad}, outside the model's vocabulary of ${vocabSize}`);
  };
  for (const id of [...tokenizer.stopIds, tokenizer.pad]) inRange([id], 'a stop or padding token');
  const rng = new Rng(seed + 7);
  for (let i = 0; i < 32; i++) {
    const problem = task.generatePrompt(rng);
    const texts: [string, string][] = [
      [problem.prompt, 'a prompt of the task'],
      [task.workedSolution(problem), 'an answer of the task'],
    ];
    for (const [text, what] of texts) {
      const ids = tokenizer.encode(text);
      if (ids.length === 0 && text.length > 0) fail(`encodes ${shown(text)} (${what}) to no tokens`);
      inRange(ids, `${shown(text)} (${what})`);
      const back = tokenizer.decode(ids);
      if (back !== text) fail(`cannot spell ${shown(text)} (${what}): it decodes to ${shown(back)}`);
    }
    const prompt = tokenizer.promptIds(problem.prompt);
    if (prompt.length === 0) fail(`renders ${shown(problem.prompt)} as a prompt of no tokens`);
    inRange(prompt, `the chat rendering of ${shown(problem.prompt)}`);
  }
}
