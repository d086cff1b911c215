import type { SchemaElement } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { RlvrError } from '../core/errors.js';
import { FileSystemError } from '../platform/errors.js';
import { basename, dirname, join, link, lstat, rename, unlink, writeFile } from '../platform/files.js';

/**
 * Prompts as verl's RL data: the parquet layout of verl's own preprocessing examples (examples/data_preprocess/
 * gsm8k.py at the pinned commit), which verl's RLHFDataset reads with `datasets.load_dataset("parquet")`:
 *
 *   data_source   string                               (verl's reward manager hands it to the reward function)
 *   prompt        list<struct<role, content: string>>  (chat messages: verl applies the model's chat template)
 *   ability       string
 *   reward_model  struct<style, ground_truth: string>  (style "rule"; ground_truth the answer the verifier reads)
 *   extra_info    struct<split: string, index: int64, line: int64>  (line: a dataset row's line, else null)
 *
 * Nested columns are written with an explicit parquet schema in the standard three-level LIST layout (an optional
 * group `prompt` annotated LIST, a repeated group `list`, an optional struct `element`), the layout pyarrow writes
 * and every Arrow reader maps to list<struct>. hyparquet-writer encodes their repetition and definition levels.
 */

/** One chat message of a prompt. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** One row of a verl RL data file. */
export interface VerlRow {
  readonly dataSource: string;
  readonly prompt: readonly ChatMessage[];
  readonly ability: string;
  /** What the reward function compares a completion's answer with. */
  readonly groundTruth: string;
  readonly split: 'train' | 'test';
  /** The row's position in its file (verl reads `extra_info.index` as the prompt's index). */
  readonly index: number;
  /** The line of the dataset file the row came from, or null for a generated prompt. */
  readonly line: number | null;
}

const text = (name: string): SchemaElement => ({
  name,
  type: 'BYTE_ARRAY',
  converted_type: 'UTF8',
  repetition_type: 'OPTIONAL',
});
const int64 = (name: string): SchemaElement => ({ name, type: 'INT64', repetition_type: 'OPTIONAL' });
const struct = (name: string, children: number): SchemaElement => ({
  name,
  repetition_type: 'OPTIONAL',
  num_children: children,
});

/** The file's schema, depth first (parquet's flattened form): what a reader's schema must map back to. */
export const VERL_PARQUET_SCHEMA: readonly SchemaElement[] = [
  { name: 'schema', num_children: 5 },
  text('data_source'),
  { ...struct('prompt', 1), converted_type: 'LIST', logical_type: { type: 'LIST' } },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  struct('element', 2),
  text('role'),
  text('content'),
  text('ability'),
  struct('reward_model', 2),
  text('style'),
  text('ground_truth'),
  struct('extra_info', 3),
  text('split'),
  int64('index'),
  int64('line'),
];

/** The rows as the bytes of one parquet file. */
export function verlParquetBytes(rows: readonly VerlRow[]): Uint8Array {
  const column = <T>(f: (r: VerlRow) => T): T[] => rows.map(f);
  const buffer = parquetWriteBuffer({
    schema: [...VERL_PARQUET_SCHEMA],
    columnData: [
      { name: 'data_source', data: column((r) => r.dataSource) },
      { name: 'prompt', data: column((r) => r.prompt.map((m) => ({ role: m.role, content: m.content }))) },
      { name: 'ability', data: column((r) => r.ability) },
      { name: 'reward_model', data: column((r) => ({ style: 'rule', ground_truth: r.groundTruth })) },
      {
        name: 'extra_info',
        data: column((r) => ({
          split: r.split,
          index: BigInt(r.index),
          line: r.line === null ? null : BigInt(r.line),
        })),
      },
    ],
  });
  return new Uint8Array(buffer);
}

/** An output file that may not be written: it exists (without overwrite), or is not a regular file. */
export class OutputFileError extends RlvrError {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`${path} ${detail}`);
  }
}

/**
 * Refuse `path` as an output file unless it is absent, or a regular file and `overwrite` is set. A link, a
 * directory or a device is never replaced (writing through a link would change a file elsewhere).
 */
export async function checkOutputFile(path: string, overwrite: boolean): Promise<void> {
  let stats: Awaited<ReturnType<typeof lstat>>;
  try {
    stats = await lstat(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw FileSystemError.from(path, e);
  }
  if (!stats.isFile())
    throw new OutputFileError(
      path,
      'exists and is not a regular file: it is never replaced (remove it, or choose another --output)',
    );
  if (!overwrite) throw new OutputFileError(path, 'exists: give --overwrite to replace it');
}

/**
 * Write `bytes` to `path` whole or not at all: into a temporary file beside it, then moved into place. Without
 * `overwrite` the move is a hard link, which fails if the name was taken meanwhile, so an existing file is never
 * replaced (a file system without hard links gets a rename after the check); with it, a rename replaces a regular
 * file (checked first).
 */
export async function writeFileWhole(path: string, bytes: Uint8Array, overwrite: boolean): Promise<void> {
  await checkOutputFile(path, overwrite);
  const tmp = join(dirname(path), `.${basename(path)}.${Math.random().toString(36).slice(2)}.tmp`);
  try {
    await writeFile(tmp, bytes, { flag: 'wx' });
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw FileSystemError.from(tmp, e);
  }
  try {
    if (overwrite) await rename(tmp, path);
    else await linkOrRename(tmp, path);
  } catch (e) {
    if (e instanceof OutputFileError) throw e;
    throw FileSystemError.from(path, e);
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

async function linkOrRename(tmp: string, path: string): Promise<void> {
  try {
    await link(tmp, path);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') throw new OutputFileError(path, 'exists: give --overwrite to replace it');
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EXDEV') throw e;
    await checkOutputFile(path, false);
    await rename(tmp, path);
  }
}

/** Write rows as a verl parquet file (see `writeFileWhole` for what is refused). */
export async function writeVerlParquet(path: string, rows: readonly VerlRow[], overwrite: boolean): Promise<void> {
  await writeFileWhole(path, verlParquetBytes(rows), overwrite);
}
