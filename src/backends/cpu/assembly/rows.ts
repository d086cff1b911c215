import { exp1, exp4, madd } from './math';

// Row and elementwise kernels, f32 with 128-bit SIMD. Threads take fixed contiguous ranges of rows (or of
// 4-aligned elements); a reduction across rows is its own pass over fixed column ranges, each summed in row
// order, so no result depends on the thread count.

@inline function range0(n: i32, tid: i32, nthreads: i32): i32 {
  return <i32>((<i64>n * tid) / nthreads);
}

@inline function hsum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** Sum of squares of row x[0 .. d) (d a multiple of 4), four lanes then their sum. */
@inline function sumSq(x: usize, d: i32): f32 {
  let acc = f32x4.splat(0);
  for (let j = 0; j < d; j += 4) {
    const v = v128.load(x + (<usize>j << 2));
    acc = madd(v, v, acc);
  }
  return hsum(acc);
}

/** out = x / sqrt(mean(x^2) + eps) * w over rows of d (d % 4 == 0); `sum` (if nonzero) gets x + delta first. */
export function rmsNorm(x: usize, delta: usize, sum: usize, w: usize, out: usize, rows: i32, d: i32, eps: f32, tid: i32, nthreads: i32): void {
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    const o = <usize>(r * d) << 2;
    let src = x + o;
    if (delta != 0) {
      for (let j = 0; j < d; j += 4) {
        const jo = <usize>j << 2;
        v128.store(sum + o + jo, f32x4.add(v128.load(x + o + jo), v128.load(delta + o + jo)));
      }
      src = sum + o;
    }
    const inv = f32x4.splat(1 / Mathf.sqrt(sumSq(src, d) / <f32>d + eps));
    for (let j = 0; j < d; j += 4) {
      const jo = <usize>j << 2;
      v128.store(out + o + jo, f32x4.mul(f32x4.mul(v128.load(src + jo), inv), v128.load(w + jo)));
    }
  }
}

/** dx = r (dy w - xhat mean(dy w xhat)), xhat = x r; writes each row's r to rinv for `rmsNormWeightGrad`. */
export function rmsNormBackward(x: usize, w: usize, dy: usize, dx: usize, rinv: usize, rows: i32, d: i32, eps: f32, tid: i32, nthreads: i32): void {
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    const o = <usize>(r * d) << 2;
    const rs: f32 = 1 / Mathf.sqrt(sumSq(x + o, d) / <f32>d + eps);
    store<f32>(rinv + (<usize>r << 2), rs);
    const rv = f32x4.splat(rs);
    let acc = f32x4.splat(0);
    for (let j = 0; j < d; j += 4) {
      const jo = <usize>j << 2;
      acc = madd(f32x4.mul(v128.load(dy + o + jo), v128.load(w + jo)), f32x4.mul(v128.load(x + o + jo), rv), acc);
    }
    const meanDot = f32x4.splat(hsum(acc) / <f32>d);
    for (let j = 0; j < d; j += 4) {
      const jo = <usize>j << 2;
      const xhat = f32x4.mul(v128.load(x + o + jo), rv);
      const gw = f32x4.mul(v128.load(dy + o + jo), v128.load(w + jo));
      v128.store(dx + o + jo, f32x4.mul(rv, f32x4.sub(gw, f32x4.mul(xhat, meanDot))));
    }
  }
}

/** dw[j] = sum over rows of dy[r, j] x[r, j] rinv[r], threads over fixed ranges of 4 columns. */
export function rmsNormWeightGrad(x: usize, dy: usize, rinv: usize, dw: usize, rows: i32, d: i32, tid: i32, nthreads: i32): void {
  const c0 = range0(d >> 2, tid, nthreads) << 2;
  const c1 = range0(d >> 2, tid + 1, nthreads) << 2;
  for (let j = c0; j < c1; j += 4) {
    const jo = <usize>j << 2;
    let acc = f32x4.splat(0);
    for (let r = 0; r < rows; r++) {
      const o = (<usize>(r * d) << 2) + jo;
      acc = madd(v128.load(dy + o), f32x4.mul(v128.load(x + o), f32x4.splat(load<f32>(rinv + (<usize>r << 2)))), acc);
    }
    v128.store(dw + jo, acc);
  }
}

/** sigmoid on four lanes: 1 / (1 + e^-x) (e^-x is +Infinity far below 0, giving 0). */
@inline function sigmoid4(x: v128): v128 {
  return f32x4.div(f32x4.splat(1), f32x4.add(f32x4.splat(1), exp4(f32x4.neg(x))));
}

/** SwiGLU on elements [i0, i1): silu(gate) * up, four at a time, the tail in lanes of its own. */
export function swiglu(gate: usize, up: usize, out: usize, n: i32, tid: i32, nthreads: i32): void {
  const i0 = range0(n, tid, nthreads);
  const i1 = range0(n, tid + 1, nthreads);
  for (let i = i0; i < i1; i += 4) {
    const o = <usize>i << 2;
    if (i + 4 <= i1) {
      const g = v128.load(gate + o);
      v128.store(out + o, f32x4.mul(f32x4.mul(g, sigmoid4(g)), v128.load(up + o)));
    } else {
      for (let t = i; t < i1; t++) {
        const q = <usize>t << 2;
        const g = f32x4.splat(load<f32>(gate + q));
        store<f32>(out + q, f32x4.extract_lane(f32x4.mul(f32x4.mul(g, sigmoid4(g)), f32x4.splat(load<f32>(up + q))), 0));
      }
    }
  }
}

/** d silu(x)/dx = s (1 + x (1 - s)), s = sigmoid(x): dgate = dy up silu'(gate), dup = dy silu(gate). */
@inline function swigluGrad(x: v128, u: v128, g: v128, dGate: usize, dUp: usize, lanes: i32): void {
  const s = sigmoid4(x);
  const one = f32x4.splat(1);
  const dg = f32x4.mul(f32x4.mul(g, u), f32x4.mul(s, f32x4.add(one, f32x4.mul(x, f32x4.sub(one, s)))));
  const du = f32x4.mul(f32x4.mul(g, x), s);
  if (lanes == 4) {
    v128.store(dGate, dg);
    v128.store(dUp, du);
  } else {
    store<f32>(dGate, f32x4.extract_lane(dg, 0));
    store<f32>(dUp, f32x4.extract_lane(du, 0));
  }
}

export function swigluBackward(gate: usize, up: usize, dy: usize, dGate: usize, dUp: usize, n: i32, tid: i32, nthreads: i32): void {
  const i0 = range0(n, tid, nthreads);
  const i1 = range0(n, tid + 1, nthreads);
  let i = i0;
  for (; i + 4 <= i1; i += 4) {
    const o = <usize>i << 2;
    swigluGrad(v128.load(gate + o), v128.load(up + o), v128.load(dy + o), dGate + o, dUp + o, 4);
  }
  for (; i < i1; i++) {
    const o = <usize>i << 2;
    swigluGrad(f32x4.splat(load<f32>(gate + o)), f32x4.splat(load<f32>(up + o)), f32x4.splat(load<f32>(dy + o)), dGate + o, dUp + o, 1);
  }
}

/** Rotate-half RoPE of rows of `heads` heads of size d (d/2 a multiple of 4), one cos/sin row per leading index. */
export function rope(x: usize, cos: usize, sin: usize, out: usize, rows: i32, heads: i32, d: i32, inverse: bool, tid: i32, nthreads: i32): void {
  const half = d >> 1;
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    for (let h = 0; h < heads; h++) {
      const o = <usize>((r * heads + h) * d) << 2;
      for (let i = 0; i < half; i += 4) {
        const io = <usize>i << 2;
        const c = v128.load(cos + (<usize>(r * half) << 2) + io);
        const s0 = v128.load(sin + (<usize>(r * half) << 2) + io);
        const s = inverse ? f32x4.neg(s0) : s0;
        const x1 = v128.load(x + o + io);
        const x2 = v128.load(x + o + (<usize>half << 2) + io);
        v128.store(out + o + io, f32x4.sub(f32x4.mul(x1, c), f32x4.mul(x2, s)));
        v128.store(out + o + (<usize>half << 2) + io, f32x4.add(f32x4.mul(x2, c), f32x4.mul(x1, s)));
      }
    }
  }
}

/** Max of row x[0 .. v) scaled by `scale` (each scaled value rounded to f32), four lanes then across them. */
@inline function rowMax(x: usize, v: i32, scale: f32): f32 {
  const sv = f32x4.splat(scale);
  let m4 = f32x4.splat(-Infinity);
  let j = 0;
  for (; j + 4 <= v; j += 4) m4 = f32x4.max(m4, f32x4.mul(v128.load(x + (<usize>j << 2)), sv));
  let mx = max(max(f32x4.extract_lane(m4, 0), f32x4.extract_lane(m4, 1)), max(f32x4.extract_lane(m4, 2), f32x4.extract_lane(m4, 3)));
  for (; j < v; j++) mx = max(mx, load<f32>(x + (<usize>j << 2)) * scale);
  return mx;
}

/** Sum of exp(scale x[j] - mx) over row x[0 .. v), four lanes then across them, the tail added after. */
@inline function rowSumExp(x: usize, v: i32, scale: f32, mx: f32): f32 {
  const sv = f32x4.splat(scale);
  const mv = f32x4.splat(mx);
  let acc = f32x4.splat(0);
  let j = 0;
  for (; j + 4 <= v; j += 4) acc = f32x4.add(acc, exp4(f32x4.sub(f32x4.mul(v128.load(x + (<usize>j << 2)), sv), mv)));
  let s = hsum(acc);
  for (; j < v; j++) s += exp1(load<f32>(x + (<usize>j << 2)) * scale - mx);
  return s;
}

/** out[r] = log softmax(scale x[r])[target[r]]; NaN for a target outside [0, v). */
export function tokenLogProbs(logits: usize, targets: usize, out: usize, rows: i32, v: i32, scale: f32, tid: i32, nthreads: i32): void {
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    const t = load<i32>(targets + (<usize>r << 2));
    if (t < 0 || t >= v) {
      store<f32>(out + (<usize>r << 2), NaN);
      continue;
    }
    const x = logits + (<usize>r * <usize>v << 2);
    const mx = rowMax(x, v, scale);
    const s = rowSumExp(x, v, scale, mx);
    store<f32>(out + (<usize>r << 2), load<f32>(x + (<usize>t << 2)) * scale - mx - Mathf.log(s));
  }
}

/** dx[r, j] = dy[r] scale (onehot(target)[j] - softmax(scale x[r])[j]). */
export function tokenLogProbsBackward(logits: usize, targets: usize, dy: usize, dx: usize, rows: i32, v: i32, scale: f32, tid: i32, nthreads: i32): void {
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    const x = logits + (<usize>r * <usize>v << 2);
    const o = dx + (<usize>r * <usize>v << 2);
    const mx = rowMax(x, v, scale);
    const inv: f32 = 1 / rowSumExp(x, v, scale, mx);
    const t = load<i32>(targets + (<usize>r << 2));
    const g = load<f32>(dy + (<usize>r << 2)) * scale;
    // dx = g (onehot - p) = -g p everywhere, then + g at the target.
    const sv = f32x4.splat(scale);
    const mv = f32x4.splat(mx);
    const gi = f32x4.splat(-g * inv);
    let j = 0;
    for (; j + 4 <= v; j += 4) {
      const jo = <usize>j << 2;
      v128.store(o + jo, f32x4.mul(gi, exp4(f32x4.sub(f32x4.mul(v128.load(x + jo), sv), mv))));
    }
    for (; j < v; j++) store<f32>(o + (<usize>j << 2), -g * inv * exp1(load<f32>(x + (<usize>j << 2)) * scale - mx));
    if (t >= 0 && t < v) store<f32>(o + (<usize>t << 2), load<f32>(o + (<usize>t << 2)) + g);
  }
}

/** Softmax or log-softmax of each row of length v (the last axis). */
export function softmaxRows(x: usize, out: usize, rows: i32, v: i32, log: bool, tid: i32, nthreads: i32): void {
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  for (let r = r0; r < r1; r++) {
    const xr = x + (<usize>r * <usize>v << 2);
    const o = out + (<usize>r * <usize>v << 2);
    const mx = rowMax(xr, v, 1);
    const s = rowSumExp(xr, v, 1, mx);
    const logS = Mathf.log(s);
    const inv: f32 = 1 / s;
    for (let j = 0; j < v; j++) {
      const z = load<f32>(xr + (<usize>j << 2)) - mx;
      store<f32>(o + (<usize>j << 2), log ? z - logS : exp1(z) * inv);
    }
  }
}

/** Block sums of squares: partial[b] = sum of x[i]^2 over block b of 4096 elements, blocks split among threads. */
export function sumSquaresBlocks(x: usize, n: i32, partial: usize, tid: i32, nthreads: i32): void {
  const blocks = (n + 4095) >> 12;
  const b0 = range0(blocks, tid, nthreads);
  const b1 = range0(blocks, tid + 1, nthreads);
  for (let b = b0; b < b1; b++) {
    const i0 = b << 12;
    const i1 = min(n, i0 + 4096);
    let acc = f32x4.splat(0);
    let i = i0;
    for (; i + 4 <= i1; i += 4) {
      const v = v128.load(x + (<usize>i << 2));
      acc = madd(v, v, acc);
    }
    let s = hsum(acc);
    for (; i < i1; i++) {
      const v = load<f32>(x + (<usize>i << 2));
      s += v * v;
    }
    store<f32>(partial + (<usize>b << 2), s);
  }
}

/**
 * One AdamW step of one leaf (PyTorch's AdamW), gradients scaled by `gscale` (the clip factor) first:
 * m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2, p' = p decay - lr (m' / c1) / (sqrt(v' / c2) + eps), where
 * decay = 1 - lr wd (given, computed by the caller).
 */
export function adamw(p: usize, g: usize, m: usize, v: usize, pOut: usize, mOut: usize, vOut: usize, n: i32,
  lr: f32, b1: f32, b2: f32, eps: f32, decayFactor: f32, c1: f32, c2: f32, gscale: f32, tid: i32, nthreads: i32): void {
  const i0 = range0(n, tid, nthreads);
  const i1 = range0(n, tid + 1, nthreads);
  const decay = f32x4.splat(decayFactor);
  const lrv = f32x4.splat(lr);
  const b1v = f32x4.splat(b1);
  const b2v = f32x4.splat(b2);
  const ob1 = f32x4.splat(1 - b1);
  const ob2 = f32x4.splat(1 - b2);
  const epsv = f32x4.splat(eps);
  const c1v = f32x4.splat(c1);
  const c2v = f32x4.splat(c2);
  const gs = f32x4.splat(gscale);
  let i = i0;
  // Four elements at a time; the rest one at a time through the same four-lane arithmetic (lane 0 of splatted
  // loads), so an element's value does not depend on where the thread ranges fall, and the plain build equals
  // the scalar formula above exactly.
  while (i < i1) {
    const full = i + 4 <= i1;
    const o = <usize>i << 2;
    const gi = f32x4.mul(full ? v128.load(g + o) : v128.load32_splat(g + o), gs);
    const mi = madd(b1v, full ? v128.load(m + o) : v128.load32_splat(m + o), f32x4.mul(ob1, gi));
    const vi = madd(b2v, full ? v128.load(v + o) : v128.load32_splat(v + o), f32x4.mul(f32x4.mul(ob2, gi), gi));
    const step = f32x4.div(f32x4.mul(lrv, f32x4.div(mi, c1v)), f32x4.add(f32x4.sqrt(f32x4.div(vi, c2v)), epsv));
    const pi = madd(full ? v128.load(p + o) : v128.load32_splat(p + o), decay, f32x4.neg(step));
    if (full) {
      v128.store(mOut + o, mi);
      v128.store(vOut + o, vi);
      v128.store(pOut + o, pi);
    } else {
      v128.store32_lane(mOut + o, mi, 0);
      v128.store32_lane(vOut + o, vi, 0);
      v128.store32_lane(pOut + o, pi, 0);
    }
    i += full ? 4 : 1;
  }
}

// Binary elementwise ops on f32: a and b of n elements, or b broadcast as a row of `bn` elements (bn divides n;
// bn = 1 is a scalar). op: 0 add, 1 sub, 2 mul, 3 div, 4 maximum, 5 minimum.
@inline function apply(op: i32, a: v128, b: v128): v128 {
  switch (op) {
    case 0: return f32x4.add(a, b);
    case 1: return f32x4.sub(a, b);
    case 2: return f32x4.mul(a, b);
    case 3: return f32x4.div(a, b);
    case 4: return f32x4.max(a, b);
    default: return f32x4.min(a, b);
  }
}

export function binary(op: i32, a: usize, b: usize, out: usize, n: i32, bn: i32, tid: i32, nthreads: i32): void {
  // Threads take ranges of whole rows of bn (a row of b is aligned with a row of a); same shapes and a scalar b
  // are rows of one element.
  const rowwise = bn != 1 && bn != n;
  const rows = rowwise ? n / bn : n;
  const r0 = range0(rows, tid, nthreads);
  const r1 = range0(rows, tid + 1, nthreads);
  if (!rowwise) {
    const scalar = bn == 1;
    const bs = v128.load32_splat(b);
    let i = r0;
    for (; i + 4 <= r1; i += 4) {
      const o = <usize>i << 2;
      v128.store(out + o, apply(op, v128.load(a + o), scalar ? bs : v128.load(b + o)));
    }
    for (; i < r1; i++) {
      const o = <usize>i << 2;
      const bv = scalar ? bs : f32x4.splat(load<f32>(b + o));
      store<f32>(out + o, f32x4.extract_lane(apply(op, f32x4.splat(load<f32>(a + o)), bv), 0));
    }
    return;
  }
  for (let r = r0; r < r1; r++) {
    const ro = <usize>r * <usize>bn << 2;
    let j = 0;
    for (; j + 4 <= bn; j += 4) {
      const jo = <usize>j << 2;
      v128.store(out + ro + jo, apply(op, v128.load(a + ro + jo), v128.load(b + jo)));
    }
    for (; j < bn; j++) {
      const jo = <usize>j << 2;
      store<f32>(out + ro + jo, f32x4.extract_lane(apply(op, f32x4.splat(load<f32>(a + ro + jo)), f32x4.splat(load<f32>(b + jo))), 0));
    }
  }
}
