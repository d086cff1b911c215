import { basename, open, openRegular, type FileHandle } from '../platform/files.js';
import { fileErrorLine } from '../platform/errors.js';
import * as E from 'fp-ts/lib/Either.js';
import type { TypedArray } from '../core/dtype.js';
import {
  CheckpointError,
  checkTiling,
  decodeBytes,
  parseEntry,
  type EntrySpec,
  type HostTensor,
} from './safetensors.js';

/**
 * safetensors files read and written a tensor at a time, so host memory stays near the largest tensor instead
 * of the whole file (a 0.6B-parameter checkpoint is 1.2 GB in bf16). Reading validates the whole header first:
 * entries, and that the file holds every byte the header promises (a truncated download is an error naming the
 * file and the first tensor cut off, before anything is uploaded).
 */
export interface SafetensorsIndex {
  readonly path: string;
  readonly entries: ReadonlyMap<string, EntrySpec>;
  readonly metadata: Readonly<Record<string, string>>;
  /** Where the data section starts in the file (8 + header length). */
  readonly dataStart: number;
}

const MAX_HEADER = 100 * 1024 * 1024;

const fail = (
  kind: CheckpointError['kind'],
  field: string,
  detail: string,
  path: string,
): E.Either<CheckpointError, never> => E.left(new CheckpointError(kind, field, detail, basename(path)));

async function readAt(handle: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await handle.read(out, done, length - done, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done === length ? out : out.subarray(0, done);
}

/** Open a safetensors file and validate its header against the file's size. */
export async function readSafetensorsIndex(path: string): Promise<E.Either<CheckpointError, SafetensorsIndex>> {
  let handle: FileHandle;
  try {
    handle = await openRegular(path);
  } catch (e) {
    const kind = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing-file' : 'io';
    return fail(kind, basename(path), `cannot be read: ${fileErrorLine(path, e)}`, path);
  }
  try {
    const size = (await handle.stat()).size;
    if (size < 8) return fail('truncated', 'header length', `the file has ${size} bytes, fewer than 8`, path);
    const n = Number(new DataView((await readAt(handle, 0, 8)).buffer).getBigUint64(0, true));
    if (n > Math.min(MAX_HEADER, size - 8))
      return fail('truncated', 'header length', `${n} header bytes do not fit in a file of ${size}`, path);
    let header: unknown;
    try {
      header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await readAt(handle, 8, n)));
    } catch (e) {
      return fail('bad-header', 'header', `not valid UTF-8 JSON (${(e as Error).message})`, path);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header))
      return fail('bad-header', 'header', 'is not a JSON object', path);
    const body = size - 8 - n;
    const entries = new Map<string, EntrySpec>();
    let metadata: Record<string, string> = {};
    for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') {
        metadata = (entry ?? {}) as Record<string, string>;
        continue;
      }
      const spec = parseEntry(name, entry, Number.MAX_SAFE_INTEGER);
      if (E.isLeft(spec))
        return E.left(new CheckpointError(spec.left.kind, spec.left.field, spec.left.detail, basename(path)));
      if (spec.right.end > body)
        return fail(
          'truncated',
          name,
          `needs bytes up to ${spec.right.end} of the data section, the file has ${body}`,
          path,
        );
      entries.set(name, spec.right);
    }
    const tiled = checkTiling(
      [...entries].map(([name, e]) => ({ name, begin: e.begin, end: e.end })),
      body,
    );
    if (E.isLeft(tiled))
      return E.left(new CheckpointError(tiled.left.kind, tiled.left.field, tiled.left.detail, basename(path)));
    return E.right({ path, entries, metadata, dataStart: 8 + n });
  } catch (e) {
    return fail('io', basename(path), `cannot be read: ${fileErrorLine(path, e)}`, path);
  } finally {
    await handle.close();
  }
}

/** Read named tensors of one file, in file order, handing each to `use` before reading the next. */
export async function streamTensors(
  index: SafetensorsIndex,
  names: readonly string[],
  use: (name: string, t: HostTensor) => void,
): Promise<void> {
  const ordered = [...names].sort((a, b) => index.entries.get(a)!.begin - index.entries.get(b)!.begin);
  const handle = await openRegular(index.path);
  try {
    for (const name of ordered) {
      const e = index.entries.get(name)!;
      const bytes = await readAt(handle, index.dataStart + e.begin, e.end - e.begin);
      use(name, { dtype: e.dtype, shape: e.shape, data: decodeBytes(bytes, e.code) });
    }
  } finally {
    await handle.close();
  }
}

/** What a written tensor is: its name, shape and stored dtype; its f32 values are asked for when it is written. */
export interface TensorToWrite {
  readonly name: string;
  readonly shape: readonly number[];
  readonly values: () => Promise<TypedArray>;
}

export type StoredDType = 'F32' | 'BF16';

/**
 * Write a safetensors file tensor by tensor (names sorted, as the Python library writes them). BF16 rounds each
 * f32 to nearest even, as `tensor.to(torch.bfloat16)` does.
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: readonly TensorToWrite[],
  dtype: StoredDType,
  metadata: Readonly<Record<string, string>> = {},
): Promise<void> {
  const bytesPer = dtype === 'F32' ? 4 : 2;
  const sorted = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = Object.keys(metadata).length > 0 ? { __metadata__: metadata } : {};
  let offset = 0;
  for (const t of sorted) {
    const bytes = t.shape.reduce((a, d) => a * d, 1) * bytesPer;
    header[t.name] = { dtype, shape: [...t.shape], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (new TextEncoder().encode(json).length % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const handle = await open(path, 'w');
  try {
    const prefix = new Uint8Array(8);
    new DataView(prefix.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
    await handle.write(prefix);
    await handle.write(headerBytes);
    for (const t of sorted) await handle.write(encodeValues(await t.values(), dtype));
  } finally {
    await handle.close();
  }
}

function encodeValues(values: TypedArray, dtype: StoredDType): Uint8Array {
  const f32 = values instanceof Float32Array ? values : Float32Array.from(values);
  const view = new DataView(f32.buffer, f32.byteOffset, f32.byteLength);
  const out = new Uint8Array(f32.length * (dtype === 'F32' ? 4 : 2));
  const target = new DataView(out.buffer);
  for (let i = 0; i < f32.length; i++) {
    const bits = view.getUint32(i * 4, true);
    if (dtype === 'F32') target.setUint32(i * 4, bits, true);
    else target.setUint16(i * 2, f32ToBf16(bits), true);
  }
  return out;
}

/** Round an f32 (as bits) to bf16, to nearest even; NaN stays a quiet NaN. */
export function f32ToBf16(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}
