import * as E from 'fp-ts/lib/Either.js';
import { computeDType, type DType, type TypedArray, type WideDType } from '../core/dtype.js';
import { RlvrError, jsonSyntaxDetail } from '../core/errors.js';

/**
 * The safetensors format: an 8-byte little-endian header length N, N bytes of JSON header (padded with spaces
 * to a multiple of 8), then the raw little-endian tensor bytes. The header maps each name to
 * { dtype, shape, data_offsets: [begin, end] } (offsets into the byte buffer after the header), plus an
 * optional "__metadata__" map of strings. Reading validates everything at this boundary and answers with a
 * typed error naming the bad field or tensor.
 */
export type CheckpointErrorKind =
  | 'io'
  | 'bad-header'
  | 'bad-dtype'
  | 'bad-offsets'
  | 'missing-tensor'
  | 'unexpected-tensor'
  | 'wrong-shape'
  | 'bad-config'
  | 'bad-state'
  /** A file differs from the manifest written with it (truncated, modified, missing). */
  | 'corrupt'
  /** A tensor holds NaN or an infinity (refused unless the loader is told to accept it). */
  | 'non-finite'
  | 'missing-file'
  | 'truncated';

export class CheckpointError extends RlvrError {
  constructor(
    readonly kind: CheckpointErrorKind,
    /** The tensor name, header field or file the error is about. */
    readonly field: string,
    /** What is wrong, without the kind, file and field (the message has them). */
    readonly detail: string,
    /** The file it was found in, when known. */
    readonly file?: string,
  ) {
    super(`checkpoint (${kind}) ${file ? `${file}: ` : ''}${field === file ? '' : `${field}: `}${detail}`);
  }
}

/** A host-side tensor: what is written and read. */
export interface HostTensor {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: TypedArray;
}

export interface SafetensorsFile {
  readonly tensors: ReadonlyMap<string, HostTensor>;
  readonly metadata: Readonly<Record<string, string>>;
}

const CODE: Record<WideDType, string> = { f32: 'F32', f64: 'F64', i32: 'I32' };
/** Readable dtypes: ours, plus the half precisions real checkpoints use (widened to f32 on read). */
const READ: Record<string, { dtype: DType; bytes: number }> = {
  F32: { dtype: 'f32', bytes: 4 },
  F64: { dtype: 'f64', bytes: 8 },
  I32: { dtype: 'i32', bytes: 4 },
  BF16: { dtype: 'f32', bytes: 2 },
  F16: { dtype: 'f32', bytes: 2 },
};
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const MAX_HEADER = 100 * 1024 * 1024;

/** One tensor of a header: its name, stored dtype code, shape and byte length in the data section. */
export interface HeaderEntry {
  readonly name: string;
  readonly code: string;
  readonly shape: readonly number[];
  readonly byteLength: number;
}

/**
 * The bytes before the data section: the 8-byte length and the JSON header (padded with spaces to a multiple of
 * 8), with `entries` laid out in the order given. The one definition both writers use (`encodeSafetensors` in
 * memory, `writeSafetensorsFile` a tensor at a time), so their files are byte for byte the same.
 */
export function encodeHeader(
  entries: readonly HeaderEntry[],
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const e of entries) {
    header[e.name] = { dtype: e.code, shape: [...e.shape], data_offsets: [offset, offset + e.byteLength] };
    offset += e.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (new TextEncoder().encode(json).length % 8)) % 8);
  const headerBytes = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + headerBytes.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerBytes.length), true);
  out.set(headerBytes, 8);
  return out;
}

/** The names of a file's tensors in the order they are written: sorted, as the Python library writes them. */
export const fileOrder = (names: Iterable<string>): string[] => [...names].sort();

export function encodeSafetensors(
  tensors: ReadonlyMap<string, HostTensor>,
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const names = fileOrder(tensors.keys());
  const entries = names.map((name) => {
    const t = tensors.get(name)!;
    // A bf16/f16 tensor's host data is its values widened to f32 (what `data()` reads), written as F32.
    const code = CODE[computeDType(t.dtype)];
    return { name, code, shape: t.shape, byteLength: t.data.length * t.data.BYTES_PER_ELEMENT };
  });
  const head = encodeHeader(entries, metadata);
  const out = new Uint8Array(head.length + entries.reduce((a, e) => a + e.byteLength, 0));
  out.set(head);
  let at = head.length;
  for (const name of names) {
    const t = tensors.get(name)!;
    out.set(toLittleEndian(t.data), at);
    at += t.data.length * t.data.BYTES_PER_ELEMENT;
  }
  return out;
}

/** A typed array's elements as little-endian bytes: a view of it on a little-endian host, a copy otherwise. */
export function toLittleEndian(a: TypedArray): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const out = new Uint8Array(a.byteLength);
  const view = new DataView(out.buffer);
  for (let i = 0; i < a.length; i++) {
    if (a instanceof Float64Array) view.setFloat64(i * 8, a[i]!, true);
    else if (a instanceof Float32Array) view.setFloat32(i * 4, a[i]!, true);
    else view.setInt32(i * 4, a[i]!, true);
  }
  return out;
}

const isRecord = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
const isNatural = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
const fail = (kind: CheckpointErrorKind, field: string, detail: string): E.Either<CheckpointError, never> =>
  E.left(new CheckpointError(kind, field, detail));

export function decodeSafetensors(bytes: Uint8Array): E.Either<CheckpointError, SafetensorsFile> {
  if (bytes.length < 8) return fail('bad-header', 'header length', `the file has ${bytes.length} bytes, fewer than 8`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = view.getBigUint64(0, true);
  if (n > BigInt(Math.min(MAX_HEADER, bytes.length - 8)))
    return fail('bad-header', 'header length', `${n} bytes does not fit in a file of ${bytes.length}`);
  let header: unknown;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(8, 8 + Number(n))));
  } catch (e) {
    return fail('bad-header', 'header', `not valid UTF-8 JSON (${jsonSyntaxDetail(e)})`);
  }
  if (!isRecord(header)) return fail('bad-header', 'header', 'is not a JSON object');
  const body = bytes.subarray(8 + Number(n));
  const metadata: Record<string, string> = {};
  const tensors = new Map<string, HostTensor>();
  const ranges: { name: string; begin: number; end: number }[] = [];
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const spec = parseEntry(name, entry, body.length);
    if (E.isLeft(spec)) return spec;
    ranges.push({ name, begin: spec.right.begin, end: spec.right.end });
  }
  const tiled = checkTiling(ranges, body.length);
  if (E.isLeft(tiled)) return tiled;
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') {
      const m = parseMetadata(entry);
      if (E.isLeft(m)) return m;
      Object.assign(metadata, m.right);
      continue;
    }
    const t = decodeEntry(name, entry, body);
    if (E.isLeft(t)) return t;
    tensors.set(name, t.right);
  }
  return E.right({ tensors, metadata });
}

/** The header's `__metadata__`: a map of strings (the format allows nothing else). */
export function parseMetadata(entry: unknown): E.Either<CheckpointError, Record<string, string>> {
  if (!isRecord(entry)) return fail('bad-header', '__metadata__', 'is not an object');
  const metadata: Record<string, string> = {};
  for (const [k, v] of Object.entries(entry)) {
    if (typeof v !== 'string') return fail('bad-header', `__metadata__.${k}`, 'is not a string');
    metadata[k] = v;
  }
  return E.right(metadata);
}

/** A validated header entry: the stored dtype code, shape and byte range in the data section. */
export interface EntrySpec {
  readonly code: string;
  readonly dtype: DType;
  readonly shape: number[];
  readonly begin: number;
  readonly end: number;
}

/** Validate one header entry against a data section of `bodyLength` bytes. */
export function parseEntry(name: string, entry: unknown, bodyLength: number): E.Either<CheckpointError, EntrySpec> {
  if (!isRecord(entry)) return fail('bad-header', name, 'entry is not an object');
  const { dtype, shape, data_offsets: offsets } = entry;
  const spec = typeof dtype === 'string' ? READ[dtype] : undefined;
  if (!spec)
    return fail(
      'bad-dtype',
      name,
      `unsupported dtype ${JSON.stringify(dtype)} (readable: ${Object.keys(READ).join(', ')})`,
    );
  if (!Array.isArray(shape) || !shape.every(isNatural))
    return fail('bad-header', name, `shape ${JSON.stringify(shape)} is not a list of natural numbers`);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isNatural))
    return fail('bad-offsets', name, `data_offsets ${JSON.stringify(offsets)} is not [begin, end]`);
  const [begin, end] = offsets as [number, number];
  const count = (shape as number[]).reduce((a, d) => a * d, 1);
  if (begin > end || end > bodyLength) {
    return fail('bad-offsets', name, `[${begin}, ${end}) is outside the ${bodyLength}-byte buffer`);
  }
  if (end - begin !== count * spec.bytes)
    return fail('bad-offsets', name, `${end - begin} bytes for ${count} elements of ${String(dtype)}`);
  return E.right({ code: dtype as string, dtype: spec.dtype, shape: shape as number[], begin, end });
}

/**
 * The safetensors rule for the data section: sorted by offset, the tensors' byte ranges tile it exactly (the first
 * begins at 0, each begins where the previous ends, the last ends at the section's end). An overlap would let two
 * tensors share bytes, a hole would misalign every tensor after it; both are refused, naming the tensor.
 */
export function checkTiling(
  entries: readonly { readonly name: string; readonly begin: number; readonly end: number }[],
  bodyLength: number,
): E.Either<CheckpointError, void> {
  const sorted = [...entries].sort((a, b) => a.begin - b.begin || a.end - b.end);
  let at = 0;
  for (const e of sorted) {
    if (e.begin < at)
      return fail('bad-offsets', e.name, `[${e.begin}, ${e.end}) overlaps the previous tensor, which ends at ${at}`);
    if (e.begin > at)
      return fail('bad-offsets', e.name, `[${e.begin}, ${e.end}) leaves a hole: the previous tensor ends at ${at}`);
    at = e.end;
  }
  if (at !== bodyLength) {
    const last = sorted.at(-1);
    return fail(
      'bad-offsets',
      last?.name ?? 'data_offsets',
      `the tensors end at byte ${at} of a ${bodyLength}-byte data section (the offsets must cover it exactly)`,
    );
  }
  return E.right(undefined);
}

function decodeEntry(name: string, entry: unknown, body: Uint8Array): E.Either<CheckpointError, HostTensor> {
  const decode = (e: EntrySpec): HostTensor => ({
    dtype: e.dtype,
    shape: e.shape,
    data: decodeBytes(body.subarray(e.begin, e.end), e.code),
  });
  return E.map(decode)(parseEntry(name, entry, body.length));
}

/** The 16-bit words of a BF16 or F16 tensor's little-endian bytes, as they are (no round trip through f32). */
export function decodeHalfWords(bytes: Uint8Array): Uint16Array {
  const count = bytes.length / 2;
  if (LITTLE_ENDIAN && bytes.byteOffset % 2 === 0) return new Uint16Array(bytes.buffer, bytes.byteOffset, count);
  const out = new Uint16Array(count);
  const raw = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) out[i] = raw.getUint16(i * 2, true);
  return out;
}

/**
 * An empty array for `count` elements of `code` if its stored bytes are its host bytes (F32, F64, I32 on a
 * little-endian host), so a reader can read a tensor straight into it (one copy of it in memory, not two); null
 * when the bytes must be converted (`decodeBytes`).
 */
export function hostLayoutArray(code: string, count: number): TypedArray | null {
  const spec = READ[code];
  if (!LITTLE_ENDIAN || !spec) return null;
  if (spec.dtype === 'f64') return spec.bytes === 8 ? new Float64Array(count) : null;
  if (spec.dtype === 'i32') return spec.bytes === 4 ? new Int32Array(count) : null;
  return spec.bytes === 4 ? new Float32Array(count) : null;
}

/**
 * The elements of one tensor's little-endian bytes: F32/F64/I32 as they are, BF16 and F16 widened to f32
 * exactly (every half-precision value is an f32 value).
 */
export function decodeBytes(bytes: Uint8Array, code: string): TypedArray {
  const spec = READ[code]!;
  const count = bytes.length / spec.bytes;
  const data =
    spec.dtype === 'f64'
      ? new Float64Array(count)
      : spec.dtype === 'i32'
        ? new Int32Array(count)
        : new Float32Array(count);
  if (LITTLE_ENDIAN && spec.bytes === data.BYTES_PER_ELEMENT) {
    new Uint8Array(data.buffer).set(bytes);
  } else if (LITTLE_ENDIAN && code === 'BF16' && bytes.byteOffset % 2 === 0) {
    // bf16 is the top half of an f32: a shift, no arithmetic.
    const half = new Uint16Array(bytes.buffer, bytes.byteOffset, count);
    const words = new Uint32Array(data.buffer);
    for (let i = 0; i < count; i++) words[i] = half[i]! << 16;
  } else {
    const raw = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    for (let i = 0; i < count; i++) data[i] = readElement(raw, i, code);
  }
  return data;
}

function readElement(view: DataView, i: number, dtype: string): number {
  switch (dtype) {
    case 'F64':
      return view.getFloat64(i * 8, true);
    case 'I32':
      return view.getInt32(i * 4, true);
    case 'BF16':
      return bf16ToF32(view.getUint16(i * 2, true));
    case 'F16':
      return f16ToF32(view.getUint16(i * 2, true));
    default:
      return view.getFloat32(i * 4, true);
  }
}

const scratch = new DataView(new ArrayBuffer(4));
function bf16ToF32(bits: number): number {
  scratch.setUint32(0, bits << 16);
  return scratch.getFloat32(0);
}

function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}
