/**
 * The data files python/tests reads (python/tests/data): what `rlvr export-data` writes for three command lines
 * (two built-in tasks, one dataset), and rows.json, the rows of each file as hyparquet (the JavaScript reader)
 * reads them, which python/tests compares with pyarrow's reading where pyarrow is installed and scores otherwise.
 * Written by examples/export-verl-data.ts; spec/engines/export-data.spec.ts fails when they differ from what the
 * command writes now.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parquetReadObjects } from 'hyparquet';

export const DATA_DIR = join('python', 'tests', 'data');

/** Each export's folder under DATA_DIR and its command line (without --output). */
export const DATA_EXPORTS: Readonly<Record<string, readonly string[]>> = {
  addition: [
    ...['--task', 'addition', '--digits', '3', '--seed', '5', '--steps', '4', '--prompts-per-step', '8'],
    ...['--eval-prompts', '20'],
  ],
  multiplication: [
    ...['--task', 'multiplication', '--digits', '2,1', '--seed', '9', '--steps', '2', '--prompts-per-step', '8'],
    ...['--eval-prompts', '12'],
  ],
  dataset: ['--dataset', join(DATA_DIR, 'dataset.jsonl'), '--eval-prompts', '12'],
};
export const DATA_FILE_NAMES = ['train.parquet', 'test.parquet'] as const;

/** The rows of a parquet file as hyparquet reads them: nested columns as arrays and objects, int64 as numbers. */
export async function readParquetRows(path: string): Promise<Record<string, unknown>[]> {
  const bytes = readFileSync(path);
  const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const rows = (await parquetReadObjects({ file })) as Record<string, unknown>[];
  return JSON.parse(JSON.stringify(rows, (_, v) => (typeof v === 'bigint' ? Number(v) : v)));
}

/** rows.json's text: `{ "addition/train.parquet": [rows], ... }`, one row per line. */
export async function rowsJson(dir: string): Promise<string> {
  const parts: string[] = [];
  for (const name of Object.keys(DATA_EXPORTS))
    for (const file of DATA_FILE_NAMES) {
      const rows = await readParquetRows(join(dir, name, file));
      parts.push(`${JSON.stringify(`${name}/${file}`)}:[\n${rows.map((r) => JSON.stringify(r)).join(',\n')}\n]`);
    }
  return `{\n${parts.join(',\n')}\n}\n`;
}
