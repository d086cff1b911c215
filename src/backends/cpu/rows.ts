import type { AdamWHyper } from '../../core/backend.js';
import type { TypedArray } from '../../core/dtype.js';

/** Row kernels of the CPU backend: softmax along an axis, RMSNorm and LayerNorm over the last axis. */

export function softmaxKernel(
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

export function rmsNormKernel(x: TypedArray, w: TypedArray, d: number, eps: number, out: TypedArray): void {
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    let ss = 0;
    for (let j = 0; j < d; j++) ss += x[o + j]! * x[o + j]!;
    const r = 1 / Math.sqrt(ss / d + eps);
    for (let j = 0; j < d; j++) out[o + j] = x[o + j]! * r * w[j]!;
  }
}

/** dx = r (gw - xhat mean(gw xhat)) with gw = dy w, xhat = x r; dw = sum over rows of dy xhat. */
export function rmsNormBackwardKernel(
  x: TypedArray,
  w: TypedArray,
  dy: TypedArray,
  d: number,
  eps: number,
  dx: TypedArray,
  dw: TypedArray,
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
      dx[o + j] = r * (dy[o + j]! * w[j]! - xhat * meanDot);
      dwAcc[j] = dwAcc[j]! + dy[o + j]! * xhat;
    }
  }
  dw.set(dwAcc);
}

export function layerNormKernel(
  x: TypedArray,
  w: TypedArray,
  b: TypedArray,
  d: number,
  eps: number,
  out: TypedArray,
): void {
  for (let row = 0; row < x.length / d; row++) {
    const o = row * d;
    const [mu, r] = moments(x, o, d, eps);
    for (let j = 0; j < d; j++) out[o + j] = (x[o + j]! - mu) * r * w[j]! + b[j]!;
  }
}

/** dx = r (gw - mean(gw) - xhat mean(gw xhat)) with gw = dy w; dw = sum dy xhat; db = sum dy. */
export function layerNormBackwardKernel(
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

/** AdamW: p <- p - lr wd p, then p <- p - lr mhat / (sqrt(vhat) + eps) with bias-corrected moments. */
export function adamwKernel(
  p: TypedArray,
  g: TypedArray,
  m: TypedArray,
  v: TypedArray,
  h: AdamWHyper,
  pOut: TypedArray,
  mOut: TypedArray,
  vOut: TypedArray,
): void {
  const c1 = 1 - h.beta1 ** h.step;
  const c2 = 1 - h.beta2 ** h.step;
  for (let i = 0; i < p.length; i++) {
    const gi = g[i]!;
    const mi = h.beta1 * m[i]! + (1 - h.beta1) * gi;
    const vi = h.beta2 * v[i]! + (1 - h.beta2) * gi * gi;
    mOut[i] = mi;
    vOut[i] = vi;
    pOut[i] = p[i]! * (1 - h.lr * h.weightDecay) - (h.lr * (mi / c1)) / (Math.sqrt(vi / c2) + h.eps);
  }
}
