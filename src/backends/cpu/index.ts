import type {
  AdamWHyper,
  AdamWManyHyper,
  Backend,
  BinaryOp,
  KernelTensor,
  MemoryInfo,
  ReduceOp,
  Storage,
  UnaryOp,
} from '../../core/backend.js';
import { allocArray, type DType, type TypedArray } from '../../core/dtype.js';
import { sizeOf, stridesOf, type Shape } from '../../core/shape.js';
import { BINARY_KERNELS, UNARY_KERNELS } from '../../core/elementwise-kernels.js';
import { broadcastOffsets, stridedOffsets } from './strided.js';
import { matmulKernel } from './matmul.js';
import {
  adamwManyKernel,
  attentionBackwardKernel,
  attentionKernel,
  ropeKernel,
  sumSquaresKernel,
  swigluBackwardKernel,
  swigluKernel,
  tokenLogProbsBackwardKernel,
  tokenLogProbsKernel,
  type AttentionDims,
} from './fused.js';
import {
  adamwKernel,
  layerNormBackwardKernel,
  layerNormKernel,
  rmsNormBackwardKernel,
  rmsNormKernel,
  softmaxKernel,
} from './rows.js';

/** The reference backend: plain TypeScript loops over typed arrays. Storage is the typed array itself. */
const arr = (s: Storage): TypedArray => s as unknown as TypedArray;
const store = (a: TypedArray): Storage => a as unknown as Storage;
const data = (x: KernelTensor): TypedArray => arr(x.storage);

/** Split a shape at `axis` into (outer, axis length, inner) for row kernels. */
export const splitAt = (shape: Shape, axis: number): [number, number, number] => [
  sizeOf(shape.slice(0, axis)),
  shape[axis]!,
  sizeOf(shape.slice(axis + 1)),
];

export class CpuBackend implements Backend {
  readonly name = 'cpu';
  readonly synchronous = true;
  // Every kernel loops rows in a fixed order whatever the batch's shape (see ARCHITECTURE.md, exactness).
  readonly batchInvariant = true;
  describe(): string {
    return 'cpu (TypeScript reference kernels, one thread)';
  }
  private buffers = 0;
  private bytes = 0;

  supportsDType(): boolean {
    return true;
  }

  private alloc(dtype: DType, size: number): TypedArray {
    const a = allocArray(dtype, size);
    this.buffers++;
    this.bytes += a.byteLength;
    return a;
  }

  upload(values: TypedArray, dtype: DType): Storage {
    const a = this.alloc(dtype, values.length);
    a.set(values);
    return store(a);
  }

  read(x: KernelTensor): Promise<TypedArray> {
    return Promise.resolve(this.readSync(x));
  }

  readSync(x: KernelTensor): TypedArray {
    return data(x).slice();
  }

  free(storage: Storage): void {
    this.buffers--;
    this.bytes -= arr(storage).byteLength;
  }

  memory(): MemoryInfo {
    return { buffers: this.buffers, bytes: this.bytes };
  }

  dispose(): void {}

  fill(shape: Shape, dtype: DType, value: number): Storage {
    const a = this.alloc(dtype, sizeOf(shape));
    a.fill(value);
    return store(a);
  }

  cast(x: KernelTensor, dtype: DType): Storage {
    const src = data(x);
    const out = this.alloc(dtype, src.length);
    if (dtype === 'i32') for (let i = 0; i < src.length; i++) out[i] = Math.trunc(src[i]!);
    else out.set(src);
    return store(out);
  }

  expand(x: KernelTensor, outShape: Shape): Storage {
    return this.gatherOffsets(x, outShape, broadcastOffsets(x.shape, outShape));
  }

  private gatherOffsets(x: KernelTensor, outShape: Shape, offsets: Int32Array | null): Storage {
    const src = data(x);
    const out = this.alloc(x.dtype, sizeOf(outShape));
    if (offsets === null) out.set(src);
    else for (let i = 0; i < out.length; i++) out[i] = src[offsets[i]!]!;
    return store(out);
  }

  unary(op: UnaryOp, x: KernelTensor): Storage {
    const f = UNARY_KERNELS[op].js;
    const src = data(x);
    const out = this.alloc(x.dtype, src.length);
    for (let i = 0; i < src.length; i++) out[i] = f(src[i]!);
    return store(out);
  }

  binary(op: BinaryOp, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage {
    const f = BINARY_KERNELS[op].js;
    const da = data(a);
    const db = data(b);
    const out = this.alloc(a.dtype, sizeOf(outShape));
    const ia = broadcastOffsets(a.shape, outShape);
    const ib = broadcastOffsets(b.shape, outShape);
    if (!ia && !ib) for (let i = 0; i < out.length; i++) out[i] = f(da[i]!, db[i]!);
    else if (!ia && b.shape.every((d) => d === 1)) {
      const s = db[0]!;
      for (let i = 0; i < out.length; i++) out[i] = f(da[i]!, s);
    } else {
      for (let i = 0; i < out.length; i++) out[i] = f(da[ia ? ia[i]! : i]!, db[ib ? ib[i]! : i]!);
    }
    return store(out);
  }

  where(cond: KernelTensor, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage {
    const dc = data(cond);
    const da = data(a);
    const db = data(b);
    const ic = broadcastOffsets(cond.shape, outShape);
    const ia = broadcastOffsets(a.shape, outShape);
    const ib = broadcastOffsets(b.shape, outShape);
    const out = this.alloc(a.dtype, sizeOf(outShape));
    for (let i = 0; i < out.length; i++)
      out[i] = dc[ic ? ic[i]! : i] !== 0 ? da[ia ? ia[i]! : i]! : db[ib ? ib[i]! : i]!;
    return store(out);
  }

  reduce(op: ReduceOp, x: KernelTensor, axes: readonly number[]): Storage {
    const src = data(x);
    const keptShape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
    // For each input element, the output element it reduces into.
    const target = stridedOffsets(
      x.shape,
      x.shape.map((_, i) => (axes.includes(i) ? 0 : stridesOf(keptShape)[i]!)),
    );
    const n = sizeOf(keptShape);
    const acc = new Float64Array(n);
    if (op === 'sum') {
      for (let i = 0; i < src.length; i++) acc[target[i]!] = acc[target[i]!]! + src[i]!;
    } else if (op === 'max' || op === 'min') {
      acc.fill(op === 'max' ? -Infinity : Infinity);
      for (let i = 0; i < src.length; i++) {
        const v = src[i]!;
        const t = target[i]!;
        if (op === 'max' ? v > acc[t]! || Number.isNaN(v) : v < acc[t]! || Number.isNaN(v)) acc[t] = v;
      }
    } else {
      const mx = new Float64Array(n).fill(-Infinity);
      for (let i = 0; i < src.length; i++) if (src[i]! > mx[target[i]!]!) mx[target[i]!] = src[i]!;
      for (let i = 0; i < src.length; i++) {
        const m = mx[target[i]!]!;
        acc[target[i]!] = acc[target[i]!]! + (m === -Infinity ? 0 : Math.exp(src[i]! - m));
      }
      for (let j = 0; j < n; j++) acc[j] = mx[j] === -Infinity ? -Infinity : Math.log(acc[j]!) + mx[j]!;
    }
    const out = this.alloc(x.dtype, n);
    out.set(acc);
    return store(out);
  }

  matmul(a: KernelTensor, b: KernelTensor, transA: boolean, transB: boolean, outShape: Shape): Storage {
    const out = this.alloc(a.dtype, sizeOf(outShape));
    matmulKernel(data(a), a.shape, data(b), b.shape, transA, transB, outShape, out);
    return store(out);
  }

  permute(x: KernelTensor, perm: readonly number[]): Storage {
    const strides = stridesOf(x.shape);
    const outShape = perm.map((p) => x.shape[p]!);
    return this.gatherOffsets(
      x,
      outShape,
      stridedOffsets(
        outShape,
        perm.map((p) => strides[p]!),
      ),
    );
  }

  slice(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
    const strides = stridesOf(x.shape);
    const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
    return this.gatherOffsets(x, outShape, stridedOffsets(outShape, strides, offset));
  }

  pad(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
    const out = this.alloc(x.dtype, sizeOf(outShape));
    this.place(out, outShape, x, begin);
    return store(out);
  }

  /** Write x into `out` (of outShape) starting at `begin`. */
  private place(out: TypedArray, outShape: Shape, x: KernelTensor, begin: readonly number[]): void {
    const strides = stridesOf(outShape);
    const offset = begin.reduce((s, b, i) => s + b * strides[i]!, 0);
    const target = stridedOffsets(x.shape, strides, offset);
    const src = data(x);
    for (let i = 0; i < src.length; i++) out[target[i]!] = src[i]!;
  }

  concat(xs: readonly KernelTensor[], axis: number, outShape: Shape): Storage {
    const out = this.alloc(xs[0]!.dtype, sizeOf(outShape));
    let off = 0;
    for (const x of xs) {
      const begin = outShape.map((_, i) => (i === axis ? off : 0));
      this.place(out, outShape, x, begin);
      off += x.shape[axis]!;
    }
    return store(out);
  }

  updateSlice(dst: KernelTensor, src: KernelTensor, begin: readonly number[], inPlace: boolean): Storage {
    let out = data(dst);
    if (!inPlace) {
      out = this.alloc(dst.dtype, out.length);
      out.set(data(dst));
    }
    this.place(out, dst.shape, src, begin);
    return store(out);
  }

  gather(x: KernelTensor, indices: KernelTensor, axis: number): Storage {
    const [outer, len, inner] = splitAt(x.shape, axis);
    const idx = data(indices);
    const src = data(x);
    const out = this.alloc(x.dtype, outer * idx.length * inner);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < idx.length; j++) {
        const r = idx[j]!;
        if (r < 0 || r >= len) continue;
        const from = (o * len + r) * inner;
        const to = (o * idx.length + j) * inner;
        for (let k = 0; k < inner; k++) out[to + k] = src[from + k]!;
      }
    }
    return store(out);
  }

  scatterAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage {
    const [outer, len, inner] = splitAt(outShape, axis);
    const idx = data(indices);
    const src = data(updates);
    const out = this.alloc(updates.dtype, sizeOf(outShape));
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < idx.length; j++) {
        const r = idx[j]!;
        if (r < 0 || r >= len) continue;
        const to = (o * len + r) * inner;
        const from = (o * idx.length + j) * inner;
        for (let k = 0; k < inner; k++) out[to + k] = out[to + k]! + src[from + k]!;
      }
    }
    return store(out);
  }

  takeAlongAxis(x: KernelTensor, indices: KernelTensor, axis: number): Storage {
    const [outer, len, inner] = splitAt(x.shape, axis);
    const n = indices.shape[axis]!;
    const idx = data(indices);
    const src = data(x);
    const out = this.alloc(x.dtype, idx.length);
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < n; j++) {
        for (let k = 0; k < inner; k++) {
          const p = (o * n + j) * inner + k;
          const r = idx[p]!;
          out[p] = r >= 0 && r < len ? src[(o * len + r) * inner + k]! : 0;
        }
      }
    }
    return store(out);
  }

  putAlongAxisAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage {
    const [outer, len, inner] = splitAt(outShape, axis);
    const n = indices.shape[axis]!;
    const idx = data(indices);
    const src = data(updates);
    const out = this.alloc(updates.dtype, sizeOf(outShape));
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < n; j++) {
        for (let k = 0; k < inner; k++) {
          const p = (o * n + j) * inner + k;
          const r = idx[p]!;
          if (r >= 0 && r < len) out[(o * len + r) * inner + k] = out[(o * len + r) * inner + k]! + src[p]!;
        }
      }
    }
    return store(out);
  }

  softmax(x: KernelTensor, axis: number, log: boolean): Storage {
    const out = this.alloc(x.dtype, sizeOf(x.shape));
    softmaxKernel(data(x), splitAt(x.shape, axis), log, out);
    return store(out);
  }

  rmsNorm(x: KernelTensor, weight: KernelTensor, eps: number): Storage {
    const out = this.alloc(x.dtype, sizeOf(x.shape));
    rmsNormKernel(data(x), data(weight), x.shape[x.shape.length - 1]!, eps, out);
    return store(out);
  }

  rmsNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage] {
    const dx = this.alloc(x.dtype, sizeOf(x.shape));
    const dw = this.alloc(x.dtype, sizeOf(weight.shape));
    rmsNormBackwardKernel(data(x), data(weight), data(dy), x.shape[x.shape.length - 1]!, eps, dx, dw);
    return [store(dx), store(dw)];
  }

  layerNorm(x: KernelTensor, weight: KernelTensor, bias: KernelTensor, eps: number): Storage {
    const out = this.alloc(x.dtype, sizeOf(x.shape));
    layerNormKernel(data(x), data(weight), data(bias), x.shape[x.shape.length - 1]!, eps, out);
    return store(out);
  }

  layerNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage, Storage] {
    const d = x.shape[x.shape.length - 1]!;
    const dx = this.alloc(x.dtype, sizeOf(x.shape));
    const dw = this.alloc(x.dtype, d);
    const db = this.alloc(x.dtype, d);
    layerNormBackwardKernel(data(x), data(weight), data(dy), d, eps, dx, dw, db);
    return [store(dx), store(dw), store(db)];
  }

  adamw(
    param: KernelTensor,
    grad: KernelTensor,
    m: KernelTensor,
    v: KernelTensor,
    h: AdamWHyper,
  ): [Storage, Storage, Storage] {
    const n = sizeOf(param.shape);
    const p1 = this.alloc(param.dtype, n);
    const m1 = this.alloc(param.dtype, n);
    const v1 = this.alloc(param.dtype, n);
    adamwKernel(data(param), data(grad), data(m), data(v), h, p1, m1, v1);
    return [store(p1), store(m1), store(v1)];
  }

  attention(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    scale: number,
    keyLength: number,
  ): Storage {
    const out = this.alloc(q.dtype, sizeOf(q.shape));
    const dims = { ...attentionDims(q, k), tk: keyLength };
    attentionKernel(data(q), data(k), data(v), keyBias && data(keyBias), dims, scale, out);
    return store(out);
  }

  attentionBackward(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    out: KernelTensor,
    dOut: KernelTensor,
    scale: number,
  ): [Storage, Storage, Storage] {
    const like = (t: KernelTensor): TypedArray => this.alloc(t.dtype, sizeOf(t.shape));
    const [dq, dk, dv] = [like(q), like(k), like(v)];
    const [bias, dims] = [keyBias && data(keyBias), attentionDims(q, k)];
    attentionBackwardKernel(data(q), data(k), data(v), bias, data(out), data(dOut), dims, scale, dq, dk, dv);
    return [store(dq), store(dk), store(dv)];
  }

  rope(xs: readonly KernelTensor[], cos: KernelTensor, sin: KernelTensor, inverse: boolean): Storage[] {
    return xs.map((x) => {
      const out = this.alloc(x.dtype, sizeOf(x.shape));
      const [heads, d] = x.shape.slice(-2) as [number, number];
      ropeKernel(data(x), data(cos), data(sin), heads, d, inverse, out);
      return store(out);
    });
  }

  addRmsNorm(x: KernelTensor, delta: KernelTensor, weight: KernelTensor, eps: number): [Storage, Storage] {
    const sum = arr(this.binary('add', x, delta, x.shape));
    const out = this.alloc(x.dtype, sizeOf(x.shape));
    rmsNormKernel(sum, data(weight), x.shape[x.shape.length - 1]!, eps, out);
    return [store(sum), store(out)];
  }

  swiglu(gate: KernelTensor, up: KernelTensor): Storage {
    const out = this.alloc(gate.dtype, sizeOf(gate.shape));
    swigluKernel(data(gate), data(up), out);
    return store(out);
  }

  swigluBackward(gate: KernelTensor, up: KernelTensor, dy: KernelTensor): [Storage, Storage] {
    const dGate = this.alloc(gate.dtype, sizeOf(gate.shape));
    const dUp = this.alloc(gate.dtype, sizeOf(gate.shape));
    swigluBackwardKernel(data(gate), data(up), data(dy), dGate, dUp);
    return [store(dGate), store(dUp)];
  }

  tokenLogProbs(logits: KernelTensor, targets: KernelTensor, scale: number): Storage {
    const out = this.alloc(logits.dtype, sizeOf(targets.shape));
    tokenLogProbsKernel(data(logits), data(targets), logits.shape[logits.shape.length - 1]!, scale, out);
    return store(out);
  }

  tokenLogProbsBackward(logits: KernelTensor, targets: KernelTensor, dy: KernelTensor, scale: number): Storage {
    const dx = this.alloc(logits.dtype, sizeOf(logits.shape));
    const v = logits.shape[logits.shape.length - 1]!;
    tokenLogProbsBackwardKernel(data(logits), data(targets), data(dy), v, scale, dx);
    return store(dx);
  }

  sumSquares(xs: readonly KernelTensor[]): Storage {
    const out = this.alloc(xs[0]!.dtype, 1);
    out[0] = sumSquaresKernel(xs.map(data));
    return store(out);
  }

  adamwMany(
    params: readonly KernelTensor[],
    grads: readonly KernelTensor[],
    m: readonly KernelTensor[],
    v: readonly KernelTensor[],
    sumSquares: KernelTensor | null,
    hyper: AdamWManyHyper,
  ): [Storage, Storage, Storage][] {
    const triple = (p: KernelTensor): TypedArray => this.alloc(p.dtype, sizeOf(p.shape));
    const outs = params.map((p): [TypedArray, TypedArray, TypedArray] => [triple(p), triple(p), triple(p)]);
    const ss = sumSquares ? data(sumSquares)[0]! : null;
    adamwManyKernel(params.map(data), grads.map(data), m.map(data), v.map(data), ss, hyper, outs);
    return outs.map((o) => o.map(store) as [Storage, Storage, Storage]);
  }
}

const attentionDims = (q: KernelTensor, k: KernelTensor): AttentionDims => {
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  return { b, tq, tk: k.shape[1]!, ks: k.shape[1]!, hq, hkv: k.shape[2]!, d };
};
