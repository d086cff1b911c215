import type { KernelTensor, Storage } from '../../core/backend.js';
import { isHalf, type HalfDType, type TypedArray } from '../../core/dtype.js';
import { widenHalf } from '../../core/half.js';
import { sizeOf, type Shape } from '../../core/shape.js';
import type { WasmHost } from './wasm-kernels.js';

/**
 * Copies as contiguous block moves (`copyWithin` over the runtime's memory): the KV cache's writes, the embedding's row
 * lookups, slices and their adjoint pads, which the reference kernels do element by element through offset arrays
 * (their garbage was 10% of a decode step; slice and pad were 3% of the main job). Any dtype; `null` where the
 * case is not a block copy (the reference kernel runs, counted).
 */
const view = (s: Storage): Float32Array => s as unknown as Float32Array;
const store = (a: ArrayLike<number>): Storage => a as unknown as Storage;

/** Each runtime's memory as bytes (made again after the memory grows: a grown memory is a new buffer). */
const memoryViews = new WeakMap<object, Uint8Array>();

/**
 * `move(to, from, count)`: elements [from, from + count) of `src` to [to, ...) of `dst`, both arrays of the
 * runtime's memory, with one `copyWithin` over the memory (no subarray per run: a row of an embedding lookup
 * took one, and its garbage).
 */
function mover(h: WasmHost, dst: ArrayBufferView, src: TypedArray): (to: number, from: number, count: number) => void {
  const buffer = h.rt.buffer;
  let bytes = memoryViews.get(h.rt);
  if (bytes === undefined || bytes.buffer !== buffer) {
    bytes = new Uint8Array(buffer);
    memoryViews.set(h.rt, bytes);
  }
  const memory = bytes;
  const size = src.BYTES_PER_ELEMENT;
  const [d0, s0] = [dst.byteOffset, src.byteOffset];
  return (to, from, count) => memory.copyWithin(d0 + to * size, s0 + from * size, s0 + (from + count) * size);
}

/**
 * dst with src written at `begin`: a block copy when src spans every axis of dst after the first axis it does not
 * (src [..1, n, rest] into dst [.., N, rest] at [.., b, 0..]): one contiguous run of src per leading index.
 */
export function updateSlice(
  h: WasmHost,
  dst: KernelTensor,
  src: KernelTensor,
  begin: readonly number[],
  inPlace: boolean,
): Storage | null {
  const r = dst.shape.length;
  // The first axis where src is shorter than dst; every later axis must be whole and begin at 0.
  let a = 0;
  while (a < r && src.shape[a] === dst.shape[a]) a++;
  for (let d = a + 1; d < r; d++) if (src.shape[d] !== dst.shape[d] || begin[d] !== 0) return null;
  for (let d = 0; d < a; d++) if (begin[d] !== 0) return null;
  const d0 = view(dst.storage);
  const out = inPlace ? d0 : h.allocRaw(dst.dtype, d0.length);
  if (!inPlace) out.set(d0);
  const s = view(src.storage);
  if (a === r) {
    out.set(s);
    return store(out);
  }
  const inner = sizeOf(dst.shape.slice(a + 1));
  const outer = sizeOf(dst.shape.slice(0, a));
  const run = src.shape[a]! * inner;
  const move = mover(h, out, s);
  for (let o = 0; o < outer; o++) move((o * dst.shape[a]! + begin[a]!) * inner, o * run, run);
  return store(out);
}

/**
 * Rows of x along axis 0 (an embedding lookup): out[j] = x[indices[j]], each row one block copy; rows of a frozen
 * bf16/f16 x are widened to f32 as they are copied (the whole table never is).
 */
export function gather(h: WasmHost, x: KernelTensor, indices: KernelTensor, axis: number): Storage | null {
  if (axis !== 0 || indices.dtype !== 'i32') return null;
  if (isHalf(x.dtype)) return gatherHalfRows(h, x, indices);
  const row = sizeOf(x.shape.slice(1));
  const idx = indices.storage as unknown as Int32Array;
  const xs = view(x.storage);
  const out = h.allocRaw(x.dtype, idx.length * row);
  const n = x.shape[0]!;
  const move = mover(h, out, xs);
  for (let j = 0; j < idx.length; j++) {
    const i = idx[j]!;
    // An index out of range reads zeros, as the reference kernel's does (the op layer range-checks before).
    if (i >= 0 && i < n) move(j * row, i * row, row);
    else out.fill(0, j * row, (j + 1) * row);
  }
  return store(out);
}

function gatherHalfRows(h: WasmHost, x: KernelTensor, indices: KernelTensor): Storage {
  const row = sizeOf(x.shape.slice(1));
  const idx = indices.storage as unknown as Int32Array;
  const words = x.storage as unknown as Uint16Array;
  const out = h.allocRaw('f32', idx.length * row) as Float32Array;
  const n = x.shape[0]!;
  for (let j = 0; j < idx.length; j++) {
    const i = idx[j]!;
    const dst = out.subarray(j * row, (j + 1) * row);
    if (i >= 0 && i < n) widenHalf(x.dtype as HalfDType, words.subarray(i * row, (i + 1) * row), dst);
    else dst.fill(0);
  }
  return store(out);
}

/**
 * The contiguous runs of a box of shape `box` placed at `begin` in an array of shape `shape`: `visit(at, from,
 * length)` for each, `at` an offset in the array, `from` in the box (row-major, in order). The axes after the last
 * one the box does not span whole join its runs.
 */
function boxRuns(
  shape: Shape,
  box: Shape,
  begin: readonly number[],
  visit: (at: number, from: number, length: number) => void,
): void {
  let a = shape.length - 1;
  let run = 1;
  while (a >= 0 && box[a] === shape[a]) run *= shape[a--]!;
  if (a < 0) {
    if (run > 0) visit(0, 0, run);
    return;
  }
  run *= box[a]!;
  const strides = new Array<number>(shape.length).fill(1);
  for (let d = shape.length - 2; d >= 0; d--) strides[d] = strides[d + 1]! * shape[d + 1]!;
  let base = 0;
  for (let d = 0; d < shape.length; d++) base += begin[d]! * strides[d]!;
  const count = sizeOf(box.slice(0, a));
  if (run === 0 || count === 0) return;
  const idx = new Array<number>(a).fill(0);
  let at = base;
  for (let t = 0; t < count; t++) {
    visit(at, t * run, run);
    // The next index of the outer axes (the last fastest), and its offset.
    for (let d = a - 1; d >= 0; d--) {
      at += strides[d]!;
      if (++idx[d]! < box[d]!) break;
      at -= idx[d]! * strides[d]!;
      idx[d] = 0;
    }
  }
}

/** x[begin .. begin + outShape) as block copies. */
export function slice(h: WasmHost, x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
  const xs = view(x.storage);
  const out = h.allocRaw(x.dtype, sizeOf(outShape));
  const move = mover(h, out, xs);
  boxRuns(x.shape, outShape, begin, (at, from, length) => move(from, at, length));
  return store(out);
}

/** Zeros of outShape with x at `begin` (slice's adjoint), as block copies. */
export function pad(h: WasmHost, x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
  const xs = view(x.storage);
  const out = h.allocRaw(x.dtype, sizeOf(outShape));
  out.fill(0);
  const move = mover(h, out, xs);
  boxRuns(outShape, x.shape, begin, (at, from, length) => move(at, from, length));
  return store(out);
}

/**
 * gather's adjoint (the embedding's gradient): zeros of outShape, and each index's run of updates added at its row
 * along `axis`, the runs in order (an entry's sum in the reference's order, in its arithmetic). Not for bf16/f16.
 */
export function scatterAdd(
  h: WasmHost,
  updates: KernelTensor,
  indices: KernelTensor,
  axis: number,
  outShape: Shape,
): Storage | null {
  if (isHalf(updates.dtype) || indices.dtype !== 'i32') return null;
  const idx = indices.storage as unknown as Int32Array;
  const src = view(updates.storage);
  const out = h.allocRaw(updates.dtype, sizeOf(outShape));
  out.fill(0);
  const outer = sizeOf(outShape.slice(0, axis));
  const len = outShape[axis]!;
  const inner = sizeOf(outShape.slice(axis + 1));
  const n = idx.length;
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < n; j++) {
      const r = idx[j]!;
      // Out of range is skipped, as the reference does (the op layer range-checks before).
      if (r < 0 || r >= len) continue;
      const at = (o * len + r) * inner;
      const from = (o * n + j) * inner;
      for (let k = 0; k < inner; k++) out[at + k] = out[at + k]! + src[from + k]!;
    }
  return store(out);
}
