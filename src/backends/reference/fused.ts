import type { KernelTensor, Storage } from '../../core/backend.js';
import type { TypedArray } from '../../core/dtype.js';
import {
  adamwStepValues,
  MASKED_KEY_BIAS,
  registerKernels,
  type AdamWInPlace,
  type AdamWManyHyper,
} from '../../core/kernels.js';
import { sizeOf } from '../../core/shape.js';
import { binary } from './elementwise.js';
import { arr, data, store, type HostBackend } from './host.js';
import { adamwLoop, rmsNormRows } from './rows.js';

/**
 * Plain-loop references of the fused kernels (attention, RoPE, residual add + RMSNorm, SwiGLU, token log-probs,
 * multi-tensor AdamW), each beside its backward.
 */

export interface AttentionDims {
  readonly b: number;
  readonly tq: number;
  /** Keys visible to the last query (tk <= ks). */
  readonly tk: number;
  /** Key rows in k, v and the bias per batch row (their stride: a preallocated KV cache's capacity). */
  readonly ks: number;
  readonly hq: number;
  readonly hkv: number;
  readonly d: number;
}

/**
 * Scores of query row (b, i, h) over its visible keys 0 .. i + tk - tq (rows of stride ks), and their softmax. Scores are rounded to
 * the inputs' precision (as separate matmul, scale and bias ops would store them): with f32 inputs a padding
 * key's s - 1e9 rounds to -1e9. A query whose own key is masked gets all-zero weights (output 0, no gradient).
 */
function probabilities(
  q: TypedArray,
  k: TypedArray,
  bias: TypedArray | null,
  dims: AttentionDims,
  scale: number,
  bi: number,
  i: number,
  h: number,
): Float64Array {
  const { tq, tk, ks, hq, hkv, d } = dims;
  const round = q instanceof Float32Array ? Math.fround : (x: number): number => x;
  const kh = Math.floor(h / (hq / hkv));
  const visible = i + tk - tq + 1;
  const qo = ((bi * tq + i) * hq + h) * d;
  const p = new Float64Array(visible);
  if (bias && bias[bi * ks + visible - 1]! <= MASKED_KEY_BIAS) return p;
  let mx = -Infinity;
  for (let j = 0; j < visible; j++) {
    const ko = ((bi * ks + j) * hkv + kh) * d;
    let s = 0;
    for (let e = 0; e < d; e++) s += q[qo + e]! * k[ko + e]!;
    p[j] = round(round(s * scale) + (bias ? bias[bi * ks + j]! : 0));
    mx = Math.max(mx, p[j]!);
  }
  let sum = 0;
  for (let j = 0; j < visible; j++) sum += p[j] = Math.exp(p[j]! - mx);
  for (let j = 0; j < visible; j++) p[j] = p[j]! / sum;
  return p;
}

// q [B, Tq, Hq, D], k, v [B, Tk, Hkv, D], keyBias [B, Tk] or null -> out [B, Tq, Hq, D] over the first keyLength keys
export function attention(
  b: HostBackend,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  keyBias: KernelTensor | null,
  scale: number,
  keyLength: number,
): Storage {
  const out = b.alloc(q.dtype, sizeOf(q.shape));
  const dims = { ...attentionDims(q, k), tk: keyLength };
  attentionLoop(data(q), data(k), data(v), keyBias && data(keyBias), dims, scale, out);
  return store(out);
}

// q, k, v, keyBias as attention's (every key row a key), out and dOut [B, Tq, Hq, D] -> dq, dk, dv
export function attentionBackward(
  b: HostBackend,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  keyBias: KernelTensor | null,
  out: KernelTensor,
  dOut: KernelTensor,
  scale: number,
): [Storage, Storage, Storage] {
  const like = (t: KernelTensor): TypedArray => b.alloc(t.dtype, sizeOf(t.shape));
  const [dq, dk, dv] = [like(q), like(k), like(v)];
  const [bias, dims] = [keyBias && data(keyBias), attentionDims(q, k)];
  attentionBackwardLoop(data(q), data(k), data(v), bias, data(out), data(dOut), dims, scale, dq, dk, dv);
  return [store(dq), store(dk), store(dv)];
}

const attentionDims = (q: KernelTensor, k: KernelTensor): AttentionDims => {
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  return { b, tq, tk: k.shape[1]!, ks: k.shape[1]!, hq, hkv: k.shape[2]!, d };
};

function attentionLoop(
  q: TypedArray,
  k: TypedArray,
  v: TypedArray,
  bias: TypedArray | null,
  dims: AttentionDims,
  scale: number,
  out: TypedArray,
): void {
  const { b, tq, ks, hq, hkv, d } = dims;
  for (let bi = 0; bi < b; bi++) {
    for (let i = 0; i < tq; i++) {
      for (let h = 0; h < hq; h++) {
        const p = probabilities(q, k, bias, dims, scale, bi, i, h);
        const kh = Math.floor(h / (hq / hkv));
        const o = ((bi * tq + i) * hq + h) * d;
        for (let e = 0; e < d; e++) {
          let acc = 0;
          for (let j = 0; j < p.length; j++) acc += p[j]! * v[((bi * ks + j) * hkv + kh) * d + e]!;
          out[o + e] = acc;
        }
      }
    }
  }
}

/**
 * dS = P (dP - rowsum(dO * O)) with dP = dO V^T (FlashAttention-2's backward); dq = scale dS K, dk = scale dS^T Q
 * summed over the query heads of a group, dv = P^T dO likewise.
 */
function attentionBackwardLoop(
  q: TypedArray,
  k: TypedArray,
  v: TypedArray,
  bias: TypedArray | null,
  out: TypedArray,
  dOut: TypedArray,
  dims: AttentionDims,
  scale: number,
  dq: TypedArray,
  dk: TypedArray,
  dv: TypedArray,
): void {
  const { b, tq, tk, hq, hkv, d } = dims;
  const dkAcc = new Float64Array(dk.length);
  const dvAcc = new Float64Array(dv.length);
  for (let bi = 0; bi < b; bi++) {
    for (let i = 0; i < tq; i++) {
      for (let h = 0; h < hq; h++) {
        const p = probabilities(q, k, bias, dims, scale, bi, i, h);
        const kh = Math.floor(h / (hq / hkv));
        const qo = ((bi * tq + i) * hq + h) * d;
        let delta = 0;
        for (let e = 0; e < d; e++) delta += dOut[qo + e]! * out[qo + e]!;
        const dqRow = new Float64Array(d);
        for (let j = 0; j < p.length; j++) {
          const ko = ((bi * tk + j) * hkv + kh) * d;
          let dp = 0;
          for (let e = 0; e < d; e++) dp += dOut[qo + e]! * v[ko + e]!;
          const ds = p[j]! * (dp - delta) * scale;
          for (let e = 0; e < d; e++) {
            dqRow[e] = dqRow[e]! + ds * k[ko + e]!;
            dkAcc[ko + e] = dkAcc[ko + e]! + ds * q[qo + e]!;
            dvAcc[ko + e] = dvAcc[ko + e]! + p[j]! * dOut[qo + e]!;
          }
        }
        for (let e = 0; e < d; e++) dq[qo + e] = dqRow[e]!;
      }
    }
  }
  dk.set(dkAcc);
  dv.set(dvAcc);
}

// each x [..., H, D], cos and sin [..., 1, D/2] -> out like x, rotated; its backward is rope with inverse
export function rope(
  b: HostBackend,
  xs: readonly KernelTensor[],
  cos: KernelTensor,
  sin: KernelTensor,
  inverse: boolean,
): Storage[] {
  return xs.map((x) => {
    const out = b.alloc(x.dtype, sizeOf(x.shape));
    const [heads, d] = x.shape.slice(-2) as [number, number];
    ropeRows(data(x), data(cos), data(sin), heads, d, inverse, out);
    return store(out);
  });
}

/** Rotate-half RoPE over rows of `heads` heads of size d, with one cos/sin row (d/2) per leading index. */
function ropeRows(
  x: TypedArray,
  cos: TypedArray,
  sin: TypedArray,
  heads: number,
  d: number,
  inverse: boolean,
  out: TypedArray,
): void {
  const half = d / 2;
  const sign = inverse ? -1 : 1;
  for (let r = 0; r < x.length / (heads * d); r++) {
    for (let h = 0; h < heads; h++) {
      const o = (r * heads + h) * d;
      for (let i = 0; i < half; i++) {
        const c = cos[r * half + i]!;
        const s = sign * sin[r * half + i]!;
        const x1 = x[o + i]!;
        const x2 = x[o + half + i]!;
        out[o + i] = x1 * c - x2 * s;
        out[o + half + i] = x2 * c + x1 * s;
      }
    }
  }
}

// x, delta [rows, d], weight [d] -> sum = x + delta, out = rmsNorm(sum) [rows, d]; its backward is the ops'
export function addRmsNorm(
  b: HostBackend,
  x: KernelTensor,
  delta: KernelTensor,
  weight: KernelTensor,
  eps: number,
): [Storage, Storage] {
  const sum = binary(b, 'add', x, delta, x.shape);
  const out = b.alloc(x.dtype, sizeOf(x.shape));
  rmsNormRows(arr(sum), data(weight), x.shape[x.shape.length - 1]!, eps, out);
  return [sum, store(out)];
}

const sigmoid = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));

// gate, up [n] -> out [n] = silu(gate) * up
export function swiglu(b: HostBackend, gateT: KernelTensor, upT: KernelTensor): Storage {
  const [gate, up] = [data(gateT), data(upT)];
  const out = b.alloc(gateT.dtype, sizeOf(gateT.shape));
  for (let i = 0; i < out.length; i++) out[i] = gate[i]! * sigmoid(gate[i]!) * up[i]!;
  return store(out);
}

// gate, up, dy [n] -> dgate, dup [n]; d silu(x)/dx = s (1 + x (1 - s)), s = sigmoid(x)
export function swigluBackward(
  b: HostBackend,
  gateT: KernelTensor,
  upT: KernelTensor,
  dyT: KernelTensor,
): [Storage, Storage] {
  const [gate, up, dy] = [data(gateT), data(upT), data(dyT)];
  const dGate = b.alloc(gateT.dtype, sizeOf(gateT.shape));
  const dUp = b.alloc(gateT.dtype, sizeOf(gateT.shape));
  for (let i = 0; i < dy.length; i++) {
    const x = gate[i]!;
    const s = sigmoid(x);
    dGate[i] = dy[i]! * up[i]! * (s * (1 + x * (1 - s)));
    dUp[i] = dy[i]! * x * s;
  }
  return [store(dGate), store(dUp)];
}

/**
 * scale * x rounded to x's precision, as a separate multiply then log-softmax would store it: the sampler scales
 * its logits that way, and its recorded log-probs must equal a fresh forward's bit for bit on this backend.
 */
const scaled = (x: TypedArray, scale: number): ((i: number) => number) => {
  if (scale === 1) return (i) => x[i]!;
  if (!(x instanceof Float32Array)) return (i) => scale * x[i]!;
  const s32 = Math.fround(scale); // a scalar operand is stored in the tensor's dtype too
  return (i) => Math.fround(s32 * x[i]!);
};

/** Max and sum of exp(sx - max) of one row of length v at offset o. */
function rowStats(sx: (i: number) => number, o: number, v: number): [number, number] {
  let mx = -Infinity;
  for (let j = 0; j < v; j++) mx = Math.max(mx, sx(o + j));
  let s = 0;
  for (let j = 0; j < v; j++) s += Math.exp(sx(o + j) - mx);
  return [mx, s];
}

// logits [rows, V], targets [rows] (i32) -> out [rows] = log softmax(scale logits)[target] (NaN out of range)
export function tokenLogProbs(b: HostBackend, logitsT: KernelTensor, targetsT: KernelTensor, scale: number): Storage {
  const [logits, targets] = [data(logitsT), data(targetsT)];
  const v = logitsT.shape[logitsT.shape.length - 1]!;
  const out = b.alloc(logitsT.dtype, sizeOf(targetsT.shape));
  for (let r = 0; r < out.length; r++) {
    const t = targets[r]!;
    if (!(t >= 0 && t < v)) {
      out[r] = NaN;
      continue;
    }
    const sx = scaled(logits, scale);
    const [mx, s] = rowStats(sx, r * v, v);
    out[r] = sx(r * v + t) - mx - Math.log(s);
  }
  return store(out);
}

// logits [rows, V], targets [rows], dy [rows] -> dx [rows, V] = dy scale (onehot(target) - softmax(scale logits))
export function tokenLogProbsBackward(
  b: HostBackend,
  logitsT: KernelTensor,
  targetsT: KernelTensor,
  dyT: KernelTensor,
  scale: number,
): Storage {
  const [logits, targets, dy] = [data(logitsT), data(targetsT), data(dyT)];
  const v = logitsT.shape[logitsT.shape.length - 1]!;
  const dx = b.alloc(logitsT.dtype, sizeOf(logitsT.shape));
  for (let r = 0; r < dy.length; r++) {
    const sx = scaled(logits, scale);
    const [mx, s] = rowStats(sx, r * v, v);
    const t = targets[r]!;
    for (let j = 0; j < v; j++) {
      const p = Math.exp(sx(r * v + j) - mx) / s;
      dx[r * v + j] = dy[r]! * scale * ((j === t ? 1 : 0) - p);
    }
  }
  return store(dx);
}

// xs [n_i] -> out [] = sum of every squared entry (its backward is ops: 2 g x)
export function sumSquares(b: HostBackend, xs: readonly KernelTensor[]): Storage {
  const out = b.alloc(xs[0]!.dtype, 1);
  let total = 0;
  for (const x of xs.map(data)) for (let i = 0; i < x.length; i++) total += x[i]! * x[i]!;
  out[0] = total;
  return store(out);
}

// per leaf: param, grad, m, v [n_i] -> param, m, v [n_i] (lr and bias corrections from hyper.schedule [4] when
// given, `adamwStepValues`); with maxNorm, gradients scaled by
// min(maxNorm / (sqrt(sumSquares) + 1e-6), 1) first. An output marked in place is written over its input (adamwLoop
// reads element i of every input before it writes element i).
export function adamwMany(
  b: HostBackend,
  params: readonly KernelTensor[],
  grads: readonly KernelTensor[],
  m: readonly KernelTensor[],
  v: readonly KernelTensor[],
  sumSquares: KernelTensor | null,
  h: AdamWManyHyper,
  inPlace?: readonly AdamWInPlace[],
): [Storage, Storage, Storage][] {
  const ss = sumSquares ? data(sumSquares)[0]! : null;
  const scale = h.maxNorm !== undefined && ss !== null ? Math.min(h.maxNorm / (Math.sqrt(ss) + 1e-6), 1) : 1;
  const schedule = h.schedule ? data(h.schedule) : null;
  return params.map((pt, i): [Storage, Storage, Storage] => {
    const into = (x: KernelTensor, over: boolean | undefined): TypedArray =>
      over ? data(x) : b.alloc(pt.dtype, sizeOf(pt.shape));
    const at = inPlace?.[i];
    const [p1, m1, v1] = [into(pt, at?.param), into(m[i]!, at?.m), into(v[i]!, at?.v)];
    const g = scale === 1 ? data(grads[i]!) : data(grads[i]!).map((x) => x * scale);
    const values = adamwStepValues(h, schedule, h.weightDecays[i]!);
    adamwLoop(data(pt), g, data(m[i]!), data(v[i]!), h, values, p1, m1, v1);
    return [store(p1), store(m1), store(v1)];
  });
}

registerKernels<HostBackend>('reference', {
  attention,
  attentionBackward,
  rope,
  addRmsNorm,
  swiglu,
  swigluBackward,
  tokenLogProbs,
  tokenLogProbsBackward,
  sumSquares,
  adamwMany,
});
