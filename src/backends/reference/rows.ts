import type { KernelTensor, Storage } from '../../core/backend.js';
import type { TypedArray } from '../../core/dtype.js';
import { adamwStepValues, registerKernels, type AdamWHyper, type AdamWStepValues } from '../../core/kernels.js';
import { sizeOf } from '../../core/shape.js';
import { data, splitAt, store, type HostBackend } from './host.js';

/**
 * Row kernels: softmax along an axis, RMSNorm and LayerNorm over the last axis (each beside its backward), and
 * the AdamW step. Each registered kernel allocates its outputs and runs a loop over typed arrays.
 */

// x [outer, len, inner] -> out [outer, len, inner], (log-)softmax along len; its backward is ops (src/ops/softmax.ts)
export function softmax(b: HostBackend, x: KernelTensor, axis: number, log: boolean): Storage {
  const out = b.alloc(x.dtype, sizeOf(x.shape));
  softmaxRows(data(x), splitAt(x.shape, axis), log, out);
  return store(out);
}

function softmaxRows(
  x: TypedArray,
  [outer, len, inner]: [number, number, number],
  log: boolean,
  out: TypedArray,
): void {
  for (let o = 0; o < outer; o++) {
    for (let k = 0; k < inner; k++) {
      const base = o * len * inner + k;
      let mx = -Infinity;
      for (let j = 0; j < len; j++) mx = Math.max(mx, x[base + j * inner]!);
      let s = 0;
      for (let j = 0; j < len; j++) s += Math.exp(x[base + j * inner]! - mx);
      const logS = Math.log(s);
      for (let j = 0; j < len; j++) {
        const z = x[base + j * inner]! - mx;
        out[base + j * inner] = log ? z - logS : Math.exp(z) / s;
      }
    }
  }
}

// x [rows, d], weight [d] -> out [rows, d] = x / sqrt(mean(x^2) + eps) * weight
export function rmsNorm(b: HostBackend, x: KernelTensor, weight: KernelTensor, eps: number): Storage {
  const out = b.alloc(x.dtype, sizeOf(x.shape));
  rmsNormRows(data(x), data(weight), x.shape[x.shape.length - 1]!, eps, out);
  return store(out);
}

export function rmsNormRows(x: TypedArray, w: TypedArray, d: number, eps: number, out: TypedArray): void {
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    let ss = 0;
    for (let j = 0; j < d; j++) ss += x[o + j]! * x[o + j]!;
    const r = 1 / Math.sqrt(ss / d + eps);
    for (let j = 0; j < d; j++) out[o + j] = x[o + j]! * r * w[j]!;
  }
}

// x [rows, d], weight [d], dy [rows, d] -> dx [rows, d], dweight [d]
export function rmsNormBackward(
  b: HostBackend,
  x: KernelTensor,
  weight: KernelTensor,
  dy: KernelTensor,
  eps: number,
  prior: KernelTensor | null,
): [Storage, Storage] {
  const dx = b.alloc(x.dtype, sizeOf(x.shape));
  const dw = b.alloc(x.dtype, sizeOf(weight.shape));
  const p = prior ? data(prior) : null;
  rmsNormBackwardRows(data(x), data(weight), data(dy), x.shape[x.shape.length - 1]!, eps, dx, dw, p);
  return [store(dx), store(dw)];
}

/** dx = r (gw - xhat mean(gw xhat)) (+ prior) with gw = dy w, xhat = x r; dw = sum over rows of dy xhat. */
function rmsNormBackwardRows(
  x: TypedArray,
  w: TypedArray,
  dy: TypedArray,
  d: number,
  eps: number,
  dx: TypedArray,
  dw: TypedArray,
  prior: TypedArray | null,
): void {
  const dwAcc = new Float64Array(d);
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    let ss = 0;
    for (let j = 0; j < d; j++) ss += x[o + j]! * x[o + j]!;
    const r = 1 / Math.sqrt(ss / d + eps);
    let dot = 0;
    for (let j = 0; j < d; j++) dot += dy[o + j]! * w[j]! * x[o + j]! * r;
    const meanDot = dot / d;
    for (let j = 0; j < d; j++) {
      const xhat = x[o + j]! * r;
      dx[o + j] = r * (dy[o + j]! * w[j]! - xhat * meanDot) + (prior ? prior[o + j]! : 0);
      dwAcc[j] = dwAcc[j]! + dy[o + j]! * xhat;
    }
  }
  dw.set(dwAcc);
}

// x [rows, d], weight [d], bias [d] -> out [rows, d] = (x - mean) / sqrt(var + eps) * weight + bias
export function layerNorm(
  b: HostBackend,
  x: KernelTensor,
  weight: KernelTensor,
  bias: KernelTensor,
  eps: number,
): Storage {
  const out = b.alloc(x.dtype, sizeOf(x.shape));
  layerNormRows(data(x), data(weight), data(bias), x.shape[x.shape.length - 1]!, eps, out);
  return store(out);
}

function layerNormRows(x: TypedArray, w: TypedArray, b: TypedArray, d: number, eps: number, out: TypedArray): void {
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    const [mu, r] = moments(x, o, d, eps);
    for (let j = 0; j < d; j++) out[o + j] = (x[o + j]! - mu) * r * w[j]! + b[j]!;
  }
}

// x [rows, d], weight [d], dy [rows, d] -> dx [rows, d], dweight [d], dbias [d]
export function layerNormBackward(
  b: HostBackend,
  x: KernelTensor,
  weight: KernelTensor,
  dy: KernelTensor,
  eps: number,
): [Storage, Storage, Storage] {
  const d = x.shape[x.shape.length - 1]!;
  const dx = b.alloc(x.dtype, sizeOf(x.shape));
  const dw = b.alloc(x.dtype, d);
  const db = b.alloc(x.dtype, d);
  layerNormBackwardRows(data(x), data(weight), data(dy), d, eps, dx, dw, db);
  return [store(dx), store(dw), store(db)];
}

/** dx = r (gw - mean(gw) - xhat mean(gw xhat)) with gw = dy w; dw = sum dy xhat; db = sum dy. */
function layerNormBackwardRows(
  x: TypedArray,
  w: TypedArray,
  dy: TypedArray,
  d: number,
  eps: number,
  dx: TypedArray,
  dw: TypedArray,
  db: TypedArray,
): void {
  const dwAcc = new Float64Array(d);
  const dbAcc = new Float64Array(d);
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    const [mu, r] = moments(x, o, d, eps);
    let sumG = 0;
    let sumGX = 0;
    for (let j = 0; j < d; j++) {
      const gw = dy[o + j]! * w[j]!;
      sumG += gw;
      sumGX += gw * (x[o + j]! - mu) * r;
    }
    for (let j = 0; j < d; j++) {
      const xhat = (x[o + j]! - mu) * r;
      dx[o + j] = r * (dy[o + j]! * w[j]! - sumG / d - (xhat * sumGX) / d);
      dwAcc[j] = dwAcc[j]! + dy[o + j]! * xhat;
      dbAcc[j] = dbAcc[j]! + dy[o + j]!;
    }
  }
  dw.set(dwAcc);
  db.set(dbAcc);
}

/** Mean and 1/sqrt(population variance + eps) of one row. */
function moments(x: TypedArray, o: number, d: number, eps: number): [number, number] {
  let mu = 0;
  for (let j = 0; j < d; j++) mu += x[o + j]!;
  mu /= d;
  let v = 0;
  for (let j = 0; j < d; j++) v += (x[o + j]! - mu) ** 2;
  return [mu, 1 / Math.sqrt(v / d + eps)];
}

// param, grad, m, v [n] -> param, m, v [n] updated (new storages)
export function adamw(
  b: HostBackend,
  param: KernelTensor,
  grad: KernelTensor,
  m: KernelTensor,
  v: KernelTensor,
  h: AdamWHyper,
): [Storage, Storage, Storage] {
  const n = sizeOf(param.shape);
  const p1 = b.alloc(param.dtype, n);
  const m1 = b.alloc(param.dtype, n);
  const v1 = b.alloc(param.dtype, n);
  const values = adamwStepValues(h, null, h.weightDecay);
  adamwLoop(data(param), data(grad), data(m), data(v), h, values, p1, m1, v1);
  return [store(p1), store(m1), store(v1)];
}

/** AdamW: p <- p - lr wd p, then p <- p - lr mhat / (sqrt(vhat) + eps) with bias-corrected moments. */
export function adamwLoop(
  p: TypedArray,
  g: TypedArray,
  m: TypedArray,
  v: TypedArray,
  h: Pick<AdamWHyper, 'beta1' | 'beta2' | 'eps'>,
  { lr, c1, c2, decay }: AdamWStepValues,
  pOut: TypedArray,
  mOut: TypedArray,
  vOut: TypedArray,
): void {
  for (let i = 0; i < p.length; i++) {
    const gi = g[i]!;
    const mi = h.beta1 * m[i]! + (1 - h.beta1) * gi;
    const vi = h.beta2 * v[i]! + (1 - h.beta2) * gi * gi;
    mOut[i] = mi;
    vOut[i] = vi;
    pOut[i] = p[i]! * decay - (lr * (mi / c1)) / (Math.sqrt(vi / c2) + h.eps);
  }
}

registerKernels<HostBackend>('reference', { softmax, rmsNorm, rmsNormBackward, layerNorm, layerNormBackward, adamw });
