import { basename, open, openRegular, type FileHandle } from '../platform/files.js';
import { jsonSyntaxDetail } from '../core/errors.js';
import { FileSystemError, fileErrorLine } from '../platform/errors.js';
import * as E from 'fp-ts/lib/Either.js';
import type { DType, HalfDType, TypedArray } from '../core/dtype.js';
import type { Tensor } from '../core/tensor.js';
import {
  CheckpointError,
  checkTiling,
  decodeBytes,
  decodeHalfWords,
  encodeHeader,
  fileOrder,
  hostLayoutArray,
  parseEntry,
  parseMetadata,
  toLittleEndian,
  type EntrySpec,
  type HostTensor,
} from './safetensors.js';

/**
 * safetensors files read and written a tensor at a time, so host memory stays near the largest tensor instead
 * of the whole file (a 0.6B-parameter checkpoint is 1.2 GB in bf16; a 278M-parameter run's optimizer state 2.2
 * GB, past what one fs call or one buffer takes). Reading validates the whole header first: entries, metadata,
 * and that the file holds every byte the header promises (a truncated download is an error naming the file and
 * the first tensor cut off, before anything is uploaded). Every read and write moves at most `IO_CHUNK_BYTES`
 * (Node refuses, or aborts on, one call over 2 GiB), and file positions are numbers, exact to 2^53.
 */
export interface SafetensorsIndex {
  readonly path: string;
  readonly entries: ReadonlyMap<string, EntrySpec>;
  readonly metadata: Readonly<Record<string, string>>;
  /** Where the data section starts in the file (8 + header length). */
  readonly dataStart: number;
}

const MAX_HEADER = 100 * 1024 * 1024;

/** The most one read or write call moves: far under Node's 2 GiB limit per call, big enough to cost nothing. */
export const IO_CHUNK_BYTES = 64 * 1024 * 1024;

const fail = (
  kind: CheckpointError['kind'],
  field: string,
  detail: string,
  path: string,
): E.Either<CheckpointError, never> => E.left(new CheckpointError(kind, field, detail, basename(path)));

/** Fill `out` from the file at `position`, a chunk per call; the bytes read (fewer only at the end of the file). */
async function readInto(handle: FileHandle, out: Uint8Array, position: number): Promise<number> {
  let done = 0;
  while (done < out.length) {
    const n = Math.min(out.length - done, IO_CHUNK_BYTES);
    const { bytesRead } = await handle.read(out, done, n, position + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done;
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  const done = await readInto(handle, out, position);
  return done === length ? out : out.subarray(0, done);
}

/** One tensor's elements: read straight into its array when the stored bytes are the host's, else converted. */
async function readTensor(handle: FileHandle, dataStart: number, e: EntrySpec): Promise<TypedArray> {
  const length = e.end - e.begin;
  const count = e.shape.reduce((a, d) => a * d, 1);
  const direct = hostLayoutArray(e.code, count);
  const bytes = direct ? new Uint8Array(direct.buffer) : new Uint8Array(length);
  const done = await readInto(handle, bytes, dataStart + e.begin);
  // The index checked the size; a file cut since then must not pass zeros off as weights.
  if (done !== length) throw Object.assign(new Error('the file ended inside a tensor'), { code: 'EIO' });
  return direct ?? decodeBytes(bytes, e.code);
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
      return fail('bad-header', 'header', `not valid UTF-8 JSON (${jsonSyntaxDetail(e)})`, path);
    }
    if (typeof header !== 'object' || header === null || Array.isArray(header))
      return fail('bad-header', 'header', 'is not a JSON object', path);
    const body = size - 8 - n;
    const entries = new Map<string, EntrySpec>();
    let metadata: Record<string, string> = {};
    for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
      if (name === '__metadata__') {
        // null is how some writers say "none"; anything else must be a map of strings, as the format says.
        const m = parseMetadata(entry ?? {});
        if (E.isLeft(m)) return E.left(new CheckpointError(m.left.kind, m.left.field, m.left.detail, basename(path)));
        metadata = m.right;
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

/** A BF16 or F16 tensor as its file stores it: the 16-bit words, not widened. */
export interface HalfHostTensor {
  readonly dtype: HalfDType;
  readonly shape: readonly number[];
  readonly words: Uint16Array;
}

const HALF_CODES: Readonly<Record<string, HalfDType>> = { BF16: 'bf16', F16: 'f16' };

/**
 * Read named tensors of one file, in file order, handing each to `use` (awaited) before reading the next, so
 * only one tensor is in host memory at a time if `use` keeps none (uploading it, say). File errors are Node's.
 */
export async function streamTensors(
  index: SafetensorsIndex,
  names: readonly string[],
  use: (name: string, t: HostTensor) => void | Promise<void>,
): Promise<void> {
  await streamTensorsKeepingHalf(
    index,
    names,
    (name, t) => use(name, t as HostTensor),
    () => false,
  );
}

/**
 * `streamTensors`, but a BF16/F16 tensor for which `keep(name, entry)` holds is handed over as its words
 * (`HalfHostTensor`), never widened: one copy of its bytes in host memory, half an f32 copy's size.
 */
export async function streamTensorsKeepingHalf(
  index: SafetensorsIndex,
  names: readonly string[],
  use: (name: string, t: HostTensor | HalfHostTensor) => void | Promise<void>,
  keep: (name: string, entry: EntrySpec) => boolean,
): Promise<void> {
  const ordered = [...names].sort((a, b) => index.entries.get(a)!.begin - index.entries.get(b)!.begin);
  const handle = await openRegular(index.path);
  try {
    for (const name of ordered) {
      const e = index.entries.get(name)!;
      const half = HALF_CODES[e.code];
      if (half !== undefined && keep(name, e)) {
        const bytes = new Uint8Array(e.end - e.begin);
        const done = await readInto(handle, bytes, index.dataStart + e.begin);
        if (done !== bytes.length) throw Object.assign(new Error('the file ended inside a tensor'), { code: 'EIO' });
        await use(name, { dtype: half, shape: e.shape, words: decodeHalfWords(bytes) });
      } else await use(name, { dtype: e.dtype, shape: e.shape, data: await readTensor(handle, index.dataStart, e) });
    }
  } finally {
    await handle.close();
  }
}

/** What a written tensor is: its name, shape and stored dtype; its values are asked for when it is written. */
export interface TensorToWrite {
  readonly name: string;
  readonly shape: readonly number[];
  /** How this tensor is stored; default: the file's dtype. */
  readonly dtype?: StoredDType;
  readonly values: () => Promise<TypedArray>;
}

export type StoredDType = 'F32' | 'BF16' | 'F64' | 'I32';

const STORED_BYTES: Record<StoredDType, number> = { F32: 4, BF16: 2, F64: 8, I32: 4 };

/**
 * How a tensor of ours is stored as it is (what `encodeSafetensors` writes for it); a bf16/f16 tensor's values
 * are read back widened, and written as F32.
 */
export const STORED: Readonly<Record<DType, StoredDType>> = {
  f32: 'F32',
  f64: 'F64',
  i32: 'I32',
  bf16: 'F32',
  f16: 'F32',
};

/**
 * Tensors to write under their names (after `prefix`), each read from its backend only when it is written, so a
 * file's writer holds one tensor on the host. `asStored`: each in the dtype it is held in (`STORED`), for a file
 * that must read back as it was (a checkpoint); otherwise in the file's dtype (a Hub export in f32 or bf16).
 */
export function tensorsToWrite(
  named: ReadonlyMap<string, Tensor>,
  opts: { readonly prefix?: string; readonly asStored?: boolean } = {},
): TensorToWrite[] {
  return [...named].map(([name, t]) => ({
    name: (opts.prefix ?? '') + name,
    shape: t.shape,
    ...(opts.asStored ? { dtype: STORED[t.dtype] } : {}),
    values: () => t.data(),
  }));
}

/** Write all of `bytes` at `position`, a chunk per call (a call may write fewer bytes than asked); the end. */
async function writeAt(handle: FileHandle, bytes: Uint8Array, position: number): Promise<number> {
  let done = 0;
  while (done < bytes.length) {
    const n = Math.min(bytes.length - done, IO_CHUNK_BYTES);
    const { bytesWritten } = await handle.write(bytes, done, n, position + done);
    done += bytesWritten;
  }
  return position + done;
}

/**
 * Write a safetensors file tensor by tensor (names sorted, as the Python library writes them): the header, then
 * each tensor's values, asked for just before they are written and converted a chunk at a time, so host memory
 * holds one tensor (and one chunk). F32, F64 and I32 tensors are written as their little-endian bytes (the same
 * file, byte for byte, as `encodeSafetensors` of the same tensors and metadata); BF16 rounds each f32 to nearest
 * even, as `tensor.to(torch.bfloat16)` does. A file operation that fails throws `FileSystemError` naming `path`;
 * values that do not fit their entry throw `CheckpointError` naming the tensor.
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: readonly TensorToWrite[],
  dtype: StoredDType,
  metadata: Readonly<Record<string, string>> = {},
): Promise<void> {
  const byName = new Map(tensors.map((t) => [t.name, t]));
  if (byName.size !== tensors.length)
    throw new CheckpointError('bad-header', 'tensors', 'two tensors of one file share a name', basename(path));
  const sorted = fileOrder(byName.keys()).map((name) => byName.get(name)!);
  const stored = (t: TensorToWrite): StoredDType => t.dtype ?? dtype;
  const count = (t: TensorToWrite): number => t.shape.reduce((a, d) => a * d, 1);
  const head = encodeHeader(
    sorted.map((t) => ({
      name: t.name,
      code: stored(t),
      shape: t.shape,
      byteLength: count(t) * STORED_BYTES[stored(t)],
    })),
    metadata,
  );
  const handle = await open(path, 'w').catch((e: unknown) => {
    throw FileSystemError.from(path, e);
  });
  try {
    let at = await writeAt(handle, head, 0).catch(fileFailure(path));
    for (const t of sorted) {
      const values = await t.values();
      if (values.length !== count(t))
        throw new CheckpointError(
          'wrong-shape',
          t.name,
          `has ${values.length} values for shape [${t.shape.join(', ')}]`,
          basename(path),
        );
      for (const chunk of encodeChunks(values, stored(t), t.name, path))
        at = await writeAt(handle, chunk, at).catch(fileFailure(path));
    }
  } finally {
    await handle.close();
  }
}

const fileFailure =
  (path: string) =>
  (e: unknown): never => {
    throw FileSystemError.from(path, e);
  };

/** Elements converted per chunk when the stored bytes are not the values' own (bf16, a widened or narrowed float). */
const CONVERT_CHUNK = 4 * 1024 * 1024;

/** A tensor's stored bytes, in chunks: views of the values where they are already the stored bytes, else copies. */
function* encodeChunks(values: TypedArray, dtype: StoredDType, name: string, path: string): Generator<Uint8Array> {
  const native =
    (dtype === 'F32' && values instanceof Float32Array) ||
    (dtype === 'F64' && values instanceof Float64Array) ||
    (dtype === 'I32' && values instanceof Int32Array);
  if (!native && dtype === 'I32')
    throw new CheckpointError('bad-dtype', name, 'I32 is written from i32 values only', basename(path));
  const step = native ? IO_CHUNK_BYTES / values.BYTES_PER_ELEMENT : CONVERT_CHUNK;
  for (let i = 0; i < values.length; i += step) {
    const part = values.subarray(i, Math.min(values.length, i + step));
    if (native) yield toLittleEndian(part);
    else if (dtype === 'F64') yield toLittleEndian(Float64Array.from(part));
    else {
      const f32 = part instanceof Float32Array ? part : Float32Array.from(part);
      if (dtype === 'F32') yield toLittleEndian(f32);
      else yield bf16Bytes(f32);
    }
  }
}

function bf16Bytes(f32: Float32Array): Uint8Array {
  const bits = new Uint32Array(f32.buffer, f32.byteOffset, f32.length);
  const out = new Uint8Array(f32.length * 2);
  const target = new DataView(out.buffer);
  for (let i = 0; i < bits.length; i++) target.setUint16(i * 2, f32ToBf16(bits[i]!), true);
  return out;
}

/** Round an f32 (as bits) to bf16, to nearest even; NaN stays a quiet NaN. */
export function f32ToBf16(bits: number): number {
  if ((bits & 0x7f800000) === 0x7f800000 && (bits & 0x7fffff) !== 0) return ((bits >>> 16) | 0x40) & 0xffff;
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}
