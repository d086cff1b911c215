import { MASKED_KEY_BIAS, type AdamWManyHyper } from '../../core/backend.js';
import type { TypedArray } from '../../core/dtype.js';
import { adamwKernel } from './rows.js';

/** Plain-loop references of the fused kernels (attention, RoPE, SwiGLU, token log-probs, multi-tensor AdamW). */

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

export function attentionKernel(
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
export function attentionBackwardKernel(
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

/** Rotate-half RoPE over rows of `heads` heads of size d, with one cos/sin row (d/2) per leading index. */
export function ropeKernel(
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

const sigmoid = (x: number): number => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x)));

export function swigluKernel(gate: TypedArray, up: TypedArray, out: TypedArray): void {
  for (let i = 0; i < out.length; i++) out[i] = gate[i]! * sigmoid(gate[i]!) * up[i]!;
}

/** d silu(x)/dx = s (1 + x (1 - s)), s = sigmoid(x). */
export function swigluBackwardKernel(
  gate: TypedArray,
  up: TypedArray,
  dy: TypedArray,
  dGate: TypedArray,
  dUp: TypedArray,
): void {
  for (let i = 0; i < dy.length; i++) {
    const x = gate[i]!;
    const s = sigmoid(x);
    dGate[i] = dy[i]! * up[i]! * (s * (1 + x * (1 - s)));
    dUp[i] = dy[i]! * x * s;
  }
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

export function tokenLogProbsKernel(
  logits: TypedArray,
  targets: TypedArray,
  v: number,
  scale: number,
  out: TypedArray,
): void {
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
}

export function tokenLogProbsBackwardKernel(
  logits: TypedArray,
  targets: TypedArray,
  dy: TypedArray,
  v: number,
  scale: number,
  dx: TypedArray,
): void {
  for (let r = 0; r < dy.length; r++) {
    const sx = scaled(logits, scale);
    const [mx, s] = rowStats(sx, r * v, v);
    const t = targets[r]!;
    for (let j = 0; j < v; j++) {
      const p = Math.exp(sx(r * v + j) - mx) / s;
      dx[r * v + j] = dy[r]! * scale * ((j === t ? 1 : 0) - p);
    }
  }
}

export function sumSquaresKernel(xs: readonly TypedArray[]): number {
  let total = 0;
  for (const x of xs) for (let i = 0; i < x.length; i++) total += x[i]! * x[i]!;
  return total;
}

/** AdamW on every leaf; with maxNorm, gradients scaled by min(maxNorm / (sqrt(sumSquares) + 1e-6), 1) first. */
export function adamwManyKernel(
  params: readonly TypedArray[],
  grads: readonly TypedArray[],
  m: readonly TypedArray[],
  v: readonly TypedArray[],
  sumSquares: number | null,
  h: AdamWManyHyper,
  outs: readonly [TypedArray, TypedArray, TypedArray][],
): void {
  const scale =
    h.maxNorm !== undefined && sumSquares !== null ? Math.min(h.maxNorm / (Math.sqrt(sumSquares) + 1e-6), 1) : 1;
  params.forEach((p, i) => {
    const g = scale === 1 ? grads[i]! : grads[i]!.map((x) => x * scale);
    adamwKernel(p, g, m[i]!, v[i]!, { ...h, weightDecay: h.weightDecays[i]! }, ...outs[i]!);
  });
}
