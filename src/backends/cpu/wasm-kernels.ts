import type { KernelTensor, Storage } from '../../core/backend.js';
import { adamwStepValues, type AdamWInPlace, type AdamWManyHyper, type BinaryOp } from '../../core/kernels.js';
import type { DType, TypedArray } from '../../core/dtype.js';
import { broadcastStrides, sizeOf, type Shape } from '../../core/shape.js';
import type { WasmRuntime } from './runtime.js';

/**
 * The kernels the CPU backend runs in WebAssembly (f32, 128-bit SIMD, on the runtime's threads). Each takes the
 * arguments of its `Kernels` signature and returns its result, or `null` for a case it does not cover (another
 * dtype, a head size not a multiple of 4, ...): the backend then runs the reference kernel, counted.
 *
 * Storage is a typed-array view into the runtime's memory, so a pointer is the view's byteOffset.
 */
export interface WasmHost {
  readonly rt: WasmRuntime;
  /** A new uninitialised array in the runtime's memory (these kernels write every entry). */
  allocRaw(dtype: DType, size: number): TypedArray;
  /** Give an `allocRaw` temporary back. */
  release(a: TypedArray): void;
  /**
   * Run kernel `name` on the runtime's threads (each claims parts of it) or on the calling thread alone, as `work`
   * (flops, or elements x 8) decides; the results are the same either way.
   */
  launch(name: string, args: readonly number[], work: number): void;
  /** This call's per-thread scratch: `bytes` for each thread at the returned address + tid * stride. */
  scratch(bytesPerThread: number): { readonly ptr: number; readonly stride: number };
}

const view = (s: Storage): TypedArray => s as unknown as TypedArray;
const store = (a: TypedArray): Storage => a as unknown as Storage;
const ptr = (x: KernelTensor): number => view(x.storage).byteOffset;
const f32 = (...xs: (KernelTensor | null)[]): boolean => xs.every((x) => x === null || x.dtype === 'f32');
const last = (s: Shape): number => s[s.length - 1]!;

let gemmScratchBytes = 0;

/** `gemmHalfB`'s code for a bf16 or f16 B (the words are widened while B's panels are packed). */
const HALF_KIND: Partial<Record<DType, number>> = { bf16: 1, f16: 2 };

/** f32 A and B (`gemm`), or f32 A and a frozen bf16/f16 B (`gemmHalfB`); C is f32. */
export function matmul(
  h: WasmHost,
  a: KernelTensor,
  b: KernelTensor,
  transA: boolean,
  transB: boolean,
  outShape: Shape,
  addend: KernelTensor | null,
): Storage | null {
  const halfKind = a.dtype === 'f32' ? HALF_KIND[b.dtype] : undefined;
  if ((!f32(a, b) && halfKind === undefined) || !f32(addend)) return null;
  const bBytes = halfKind === undefined ? 4 : 2;
  const r = outShape.length;
  const m = outShape[r - 2]!;
  const n = outShape[r - 1]!;
  const k = transA ? a.shape[a.shape.length - 2]! : last(a.shape);
  const out = h.allocRaw('f32', sizeOf(outShape));
  const batch = outShape.slice(0, -2);
  const count = sizeOf(batch);
  if (count === 0 || m === 0 || n === 0) return store(out);
  if (gemmScratchBytes === 0) gemmScratchBytes = h.rt.call('gemmScratchFloats', []) * 4;
  const sc = h.scratch(gemmScratchBytes);
  const aStr = broadcastStrides(a.shape.slice(0, -2), batch).map((s) => s * m * k);
  const bStr = broadcastStrides(b.shape.slice(0, -2), batch).map((s) => s * k * n);
  const [sai, sak] = transA ? [1, m] : [k, 1];
  const [sbk, sbj] = transB ? [1, k] : [n, 1];
  const work = 2 * m * n * k;
  const idx = new Array<number>(batch.length).fill(0);
  for (let t = 0; t < count; t++) {
    let ao = 0;
    let bo = 0;
    for (let d = 0; d < batch.length; d++) {
      ao += idx[d]! * aStr[d]!;
      bo += idx[d]! * bStr[d]!;
    }
    const args = [
      ptr(a) + ao * 4,
      ptr(b) + bo * bBytes,
      out.byteOffset + t * m * n * 4,
      m,
      n,
      k,
      sai,
      sak,
      sbk,
      sbj,
      n,
      sc.ptr,
      sc.stride,
    ];
    if (halfKind === undefined) h.launch('gemm', args, work);
    else h.launch('gemmHalfB', [...args, halfKind], work);
    for (let d = batch.length - 1; d >= 0; d--) {
      if (++idx[d]! < batch[d]!) break;
      idx[d] = 0;
    }
  }
  if (addend) addInPlace(h, out, addend);
  return store(out);
}

export function attention(
  h: WasmHost,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  keyBias: KernelTensor | null,
  scale: number,
  keyLength: number,
): Storage | null {
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  const [ks, hkv] = [k.shape[1]!, k.shape[2]!];
  if (!f32(q, k, v, keyBias) || d % 4 !== 0) return null;
  const out = h.allocRaw('f32', sizeOf(q.shape));
  const sc = h.scratch(h.rt.call('attentionScratchFloats', [ks]) * 4);
  const work = b * tq * hq * keyLength * d * 4;
  h.launch(
    'attentionForward',
    [
      ptr(q),
      ptr(k),
      ptr(v),
      keyBias ? ptr(keyBias) : 0,
      out.byteOffset,
      b,
      tq,
      keyLength,
      ks,
      hq,
      hkv,
      d,
      scale,
      sc.ptr,
      sc.stride,
    ],
    work,
  );
  return store(out);
}

export function attentionBackward(
  h: WasmHost,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  keyBias: KernelTensor | null,
  out: KernelTensor,
  dOut: KernelTensor,
  scale: number,
): [Storage, Storage, Storage] | null {
  const [b, t, hq, d] = q.shape as [number, number, number, number];
  const hkv = k.shape[2]!;
  if (!f32(q, k, v, keyBias, out, dOut) || d % 4 !== 0 || k.shape[1] !== t) return null;
  const dq = h.allocRaw('f32', sizeOf(q.shape));
  const dk = h.allocRaw('f32', sizeOf(k.shape));
  const dv = h.allocRaw('f32', sizeOf(v.shape));
  const sc = h.scratch(h.rt.call('attentionScratchFloats', [t]) * 4);
  h.launch(
    'attentionBackward',
    [
      ptr(q),
      ptr(k),
      ptr(v),
      keyBias ? ptr(keyBias) : 0,
      ptr(out),
      ptr(dOut),
      dq.byteOffset,
      dk.byteOffset,
      dv.byteOffset,
      b,
      t,
      hq,
      hkv,
      d,
      scale,
      sc.ptr,
      sc.stride,
    ],
    b * t * t * hq * d * 4,
  );
  return [store(dq), store(dk), store(dv)];
}

function normRows(
  h: WasmHost,
  x: KernelTensor,
  delta: KernelTensor | null,
  weight: KernelTensor,
  eps: number,
): [Storage, Storage] | null {
  const d = last(x.shape);
  if (!f32(x, delta, weight) || d % 4 !== 0) return null;
  const n = sizeOf(x.shape);
  const sum = delta ? h.allocRaw('f32', n) : null;
  const out = h.allocRaw('f32', n);
  h.launch(
    'rmsNorm',
    [ptr(x), delta ? ptr(delta) : 0, sum ? sum.byteOffset : 0, ptr(weight), out.byteOffset, n / d, d, eps],
    n * 8,
  );
  return [store(sum ?? out), store(out)];
}

export const rmsNorm = (h: WasmHost, x: KernelTensor, weight: KernelTensor, eps: number): Storage | null =>
  normRows(h, x, null, weight, eps)?.[1] ?? null;

export const addRmsNorm = (
  h: WasmHost,
  x: KernelTensor,
  delta: KernelTensor,
  weight: KernelTensor,
  eps: number,
): [Storage, Storage] | null =>
  x.shape.length === delta.shape.length && sizeOf(x.shape) === sizeOf(delta.shape)
    ? normRows(h, x, delta, weight, eps)
    : null;

export function rmsNormBackward(
  h: WasmHost,
  x: KernelTensor,
  weight: KernelTensor,
  dy: KernelTensor,
  eps: number,
  prior: KernelTensor | null,
): [Storage, Storage] | null {
  const d = last(x.shape);
  if (!f32(x, weight, dy, prior) || d % 4 !== 0) return null;
  const n = sizeOf(x.shape);
  const rows = n / d;
  const dx = h.allocRaw('f32', n);
  const dw = h.allocRaw('f32', d);
  const rinv = h.allocRaw('f32', Math.max(rows, 1));
  h.launch('rmsNormBackward', [ptr(x), ptr(weight), ptr(dy), dx.byteOffset, rinv.byteOffset, rows, d, eps], n * 8);
  h.launch('rmsNormWeightGrad', [ptr(x), ptr(dy), rinv.byteOffset, dw.byteOffset, rows, d], n * 8);
  h.release(rinv);
  if (prior) addInPlace(h, dx, prior);
  return [store(dx), store(dw)];
}

export function swiglu(h: WasmHost, gate: KernelTensor, up: KernelTensor): Storage | null {
  if (!f32(gate, up)) return null;
  const n = sizeOf(gate.shape);
  const out = h.allocRaw('f32', n);
  h.launch('swiglu', [ptr(gate), ptr(up), out.byteOffset, n], n * 8);
  return store(out);
}

export function swigluBackward(
  h: WasmHost,
  gate: KernelTensor,
  up: KernelTensor,
  dy: KernelTensor,
): [Storage, Storage] | null {
  if (!f32(gate, up, dy)) return null;
  const n = sizeOf(gate.shape);
  const dg = h.allocRaw('f32', n);
  const du = h.allocRaw('f32', n);
  h.launch('swigluBackward', [ptr(gate), ptr(up), ptr(dy), dg.byteOffset, du.byteOffset, n], n * 8);
  return [store(dg), store(du)];
}

export function rope(
  h: WasmHost,
  xs: readonly KernelTensor[],
  cos: KernelTensor,
  sin: KernelTensor,
  inverse: boolean,
): Storage[] | null {
  if (!f32(cos, sin, ...xs) || xs.some((x) => last(x.shape) % 8 !== 0)) return null;
  return xs.map((x) => {
    const [heads, d] = x.shape.slice(-2) as [number, number];
    const n = sizeOf(x.shape);
    const out = h.allocRaw('f32', n);
    h.launch('rope', [ptr(x), ptr(cos), ptr(sin), out.byteOffset, n / (heads * d), heads, d, inverse ? 1 : 0], n * 8);
    return store(out);
  });
}

export function tokenLogProbs(h: WasmHost, logits: KernelTensor, targets: KernelTensor, scale: number): Storage | null {
  if (!f32(logits) || targets.dtype !== 'i32') return null;
  const v = last(logits.shape);
  const rows = sizeOf(targets.shape);
  const out = h.allocRaw('f32', rows);
  h.launch('tokenLogProbs', [ptr(logits), ptr(targets), out.byteOffset, rows, v, Math.fround(scale)], rows * v * 8);
  return store(out);
}

export function tokenLogProbsBackward(
  h: WasmHost,
  logits: KernelTensor,
  targets: KernelTensor,
  dy: KernelTensor,
  scale: number,
): Storage | null {
  if (!f32(logits, dy) || targets.dtype !== 'i32') return null;
  const v = last(logits.shape);
  const rows = sizeOf(targets.shape);
  const dx = h.allocRaw('f32', rows * v);
  h.launch(
    'tokenLogProbsBackward',
    [ptr(logits), ptr(targets), ptr(dy), dx.byteOffset, rows, v, Math.fround(scale)],
    rows * v * 8,
  );
  return store(dx);
}

export function softmax(h: WasmHost, x: KernelTensor, axis: number, log: boolean): Storage | null {
  if (!f32(x) || axis !== x.shape.length - 1) return null;
  const v = last(x.shape);
  const n = sizeOf(x.shape);
  const out = h.allocRaw('f32', n);
  if (n > 0) h.launch('softmaxRows', [ptr(x), out.byteOffset, n / v, v, log ? 1 : 0], n * 8);
  return store(out);
}

const BINARY_CODES: Partial<Record<BinaryOp, number>> = { add: 0, sub: 1, mul: 2, div: 3, maximum: 4, minimum: 5 };

/**
 * out += prior (both f32, one size): the accumulation a GPU kernel folds into its store (`absorbed`,
 * core/tape.ts), done here as the binary kernel in place; each entry is read before it is written.
 */
function addInPlace(h: WasmHost, out: TypedArray, prior: KernelTensor): void {
  const n = out.length;
  if (n > 0) h.launch('binary', [BINARY_CODES.add!, out.byteOffset, ptr(prior), out.byteOffset, n, n], n * 8);
}

/** Same shapes, a scalar b, or b a trailing row of a (b.shape a suffix of a's, with leading 1s). */
export function binary(h: WasmHost, op: BinaryOp, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage | null {
  const code = BINARY_CODES[op];
  if (code === undefined || !f32(a, b)) return null;
  const n = sizeOf(outShape);
  if (sizeOf(a.shape) !== n) return null;
  const bn = sizeOf(b.shape);
  const suffix = outShape.slice(outShape.length - trimmed(b.shape).length);
  if (!(bn === n || bn === 1 || (sizeOf(suffix) === bn && trimmed(b.shape).every((d, i) => d === suffix[i]))))
    return null;
  const out = h.allocRaw('f32', n);
  if (n > 0) h.launch('binary', [code, ptr(a), ptr(b), out.byteOffset, n, bn], n * 8);
  return store(out);
}

const trimmed = (s: Shape): Shape => {
  let i = 0;
  while (i < s.length && s[i] === 1) i++;
  return s.slice(i);
};

export function sumSquares(h: WasmHost, xs: readonly KernelTensor[]): Storage | null {
  if (!f32(...xs)) return null;
  let total = 0;
  for (const x of xs) total += sumSquaresOf(h, x);
  const out = h.allocRaw('f32', 1);
  out[0] = total;
  return store(out);
}

/** Sum of squares of one tensor: fixed blocks of 4096 summed in f32, the block sums added in order in f64. */
function sumSquaresOf(h: WasmHost, x: KernelTensor): number {
  const n = sizeOf(x.shape);
  const blocks = Math.ceil(n / 4096);
  if (blocks === 0) return 0;
  const partial = h.allocRaw('f32', blocks);
  h.launch('sumSquaresBlocks', [ptr(x), n, partial.byteOffset], n * 8);
  let s = 0;
  for (let i = 0; i < blocks; i++) s += partial[i]!;
  h.release(partial);
  return s;
}

export function adamwMany(
  h: WasmHost,
  params: readonly KernelTensor[],
  grads: readonly KernelTensor[],
  m: readonly KernelTensor[],
  v: readonly KernelTensor[],
  sumSq: KernelTensor | null,
  hyper: AdamWManyHyper,
  inPlace?: readonly AdamWInPlace[],
): [Storage, Storage, Storage][] | null {
  if (!f32(...params, ...grads, ...m, ...v)) return null;
  const ss = sumSq ? view(sumSq.storage)[0]! : null;
  const gscale = hyper.maxNorm !== undefined && ss !== null ? Math.min(hyper.maxNorm / (Math.sqrt(ss) + 1e-6), 1) : 1;
  const schedule = hyper.schedule ? view(hyper.schedule.storage) : null;
  return params.map((p, i) => {
    const { lr, c1, c2, decay } = adamwStepValues(hyper, schedule, hyper.weightDecays[i]!);
    const n = sizeOf(p.shape);
    // In place, an output is its input: the kernel loads element i of each input before it stores element i.
    const into = (x: KernelTensor, over: boolean | undefined): TypedArray =>
      over ? view(x.storage) : h.allocRaw('f32', n);
    const at = inPlace?.[i];
    const outs = [into(p, at?.param), into(m[i]!, at?.m), into(v[i]!, at?.v)] as const;
    h.launch(
      'adamw',
      [
        ptr(p),
        ptr(grads[i]!),
        ptr(m[i]!),
        ptr(v[i]!),
        outs[0].byteOffset,
        outs[1].byteOffset,
        outs[2].byteOffset,
        n,
        lr,
        hyper.beta1,
        hyper.beta2,
        hyper.eps,
        decay,
        c1,
        c2,
        gscale,
      ],
      n * 16,
    );
    return [store(outs[0]), store(outs[1]), store(outs[2])];
  });
}
