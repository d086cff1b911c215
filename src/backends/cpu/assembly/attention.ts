// Causal attention, forward and backward, f32 with 128-bit SIMD over the head dimension (D a multiple of 4).
// Layout as the reference kernel's (src/backends/reference): q [B, Tq, Hq, D], k and v [B, Ks, Hkv, D] of which
// the first tk rows are keys, keyBias [B, Ks] (or 0 for none). Query head h reads key/value head h / (Hq / Hkv).
// Query i sees keys 0 .. i + tk - tq. A key whose bias is <= MASKED (the policy's padding) is masked, and a query
// whose own key is masked outputs 0 and passes no gradient (as PyTorch's sdpa gives a fully masked row).
//
// Scores live in a per-thread row of Ks floats (never a T x T buffer). Each query row (forward) or each
// (batch, key/value head) pair (backward, which owns its dk and dv rows) is done by one thread in a fixed order,
// so results do not depend on the thread count.

import { exp1, exp4, madd } from './math';

const MASKED: f32 = -5e8;

// A dot product over D sums four lanes, then the lanes as (l0 + l2) + (l1 + l3): `dot4` gives four keys' scores
// with exactly that order, so a key's score is the same whether it is scored alone or in a four.
@inline function dot(a: usize, b: usize, d: i32): f32 {
  let acc = f32x4.splat(0);
  for (let e = 0; e < d; e += 4) {
    const o = <usize>e << 2;
    acc = madd(v128.load(a + o), v128.load(b + o), acc);
  }
  return f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 2) + (f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 3));
}

/** The dot products of a with b0..b3 (rows `stride` bytes apart) as one vector, each summed as `dot` sums. */
@inline function dot4(a: usize, b: usize, stride: usize, d: i32): v128 {
  let s0 = f32x4.splat(0);
  let s1 = f32x4.splat(0);
  let s2 = f32x4.splat(0);
  let s3 = f32x4.splat(0);
  for (let e = 0; e < d; e += 4) {
    const o = <usize>e << 2;
    const x = v128.load(a + o);
    s0 = madd(x, v128.load(b + o), s0);
    s1 = madd(x, v128.load(b + stride + o), s1);
    s2 = madd(x, v128.load(b + 2 * stride + o), s2);
    s3 = madd(x, v128.load(b + 3 * stride + o), s3);
  }
  // (s0_0 + s0_2, s1_0 + s1_2, s0_1 + s0_3, s1_1 + s1_3), likewise for s2, s3; then lanes 0+2 and 1+3 of those.
  const x01 = f32x4.add(v128.shuffle<f32>(s0, s1, 0, 4, 1, 5), v128.shuffle<f32>(s0, s1, 2, 6, 3, 7));
  const x23 = f32x4.add(v128.shuffle<f32>(s2, s3, 0, 4, 1, 5), v128.shuffle<f32>(s2, s3, 2, 6, 3, 7));
  return f32x4.add(v128.shuffle<f32>(x01, x23, 0, 1, 4, 5), v128.shuffle<f32>(x01, x23, 2, 3, 6, 7));
}

/**
 * Softmax weights of query row (bi, i, h) into p[0 .. visible); returns visible, or 0 when the query is masked.
 * Scores are rounded as the reference rounds them: (q.k * scale) then + bias, each in f32.
 */
function probabilities(
  q: usize, k: usize, bias: usize, p: usize,
  tq: i32, tk: i32, ks: i32, hq: i32, hkv: i32, d: i32, scale: f32, bi: i32, i: i32, h: i32,
): i32 {
  const kh = h / (hq / hkv);
  const visible = i + tk - tq + 1;
  if (visible <= 0) return 0;
  if (bias != 0 && load<f32>(bias + (<usize>(bi * ks + visible - 1) << 2)) <= MASKED) return 0;
  const qo = q + (<usize>(((bi * tq + i) * hq + h) * d) << 2);
  const kstride = <usize>(hkv * d) << 2;
  let kp = k + (<usize>((bi * ks * hkv + kh) * d) << 2);
  const bb = bias + (<usize>(bi * ks) << 2);
  const sv = f32x4.splat(scale);
  let m4 = f32x4.splat(-Infinity);
  let j = 0;
  for (; j + 4 <= visible; j += 4) {
    let s = f32x4.mul(dot4(qo, kp, kstride, d), sv);
    if (bias != 0) s = f32x4.add(s, v128.load(bb + (<usize>j << 2)));
    v128.store(p + (<usize>j << 2), s);
    m4 = f32x4.max(m4, s);
    kp += kstride << 2;
  }
  let mx = max(max(f32x4.extract_lane(m4, 0), f32x4.extract_lane(m4, 1)), max(f32x4.extract_lane(m4, 2), f32x4.extract_lane(m4, 3)));
  for (; j < visible; j++) {
    let s: f32 = dot(qo, kp, d) * scale;
    if (bias != 0) s += load<f32>(bb + (<usize>j << 2));
    store<f32>(p + (<usize>j << 2), s);
    mx = max(mx, s);
    kp += kstride;
  }
  // exp of every score (a value does not depend on its lane), then their sum in four lanes by distance from the
  // query's own key, walking back from it: with left padding a real key keeps its lane and its place in its lane's
  // order, and the padding keys' exact zeros come last (x + 0 = x), so a row's weights do not depend on how much
  // padding the batch gives it. The four floats before p are zeros (the scratch row's head).
  const mv = f32x4.splat(mx);
  j = 0;
  for (; j + 4 <= visible; j += 4) {
    const o = p + (<usize>j << 2);
    v128.store(o, exp4(f32x4.sub(v128.load(o), mv)));
  }
  for (; j < visible; j++) store<f32>(p + (<usize>j << 2), exp1(load<f32>(p + (<usize>j << 2)) - mx));
  let acc = f32x4.splat(0);
  for (j = visible - 4; j > -4; j -= 4) acc = f32x4.add(acc, v128.load(p + (<isize>j << 2)));
  const sum: f32 = f32x4.extract_lane(acc, 0) + f32x4.extract_lane(acc, 2) + (f32x4.extract_lane(acc, 1) + f32x4.extract_lane(acc, 3));
  const inv = f32x4.splat(1 / sum);
  for (j = 0; j < visible; j += 4) {
    const o = p + (<usize>j << 2);
    v128.store(o, f32x4.mul(v128.load(o), inv));
  }
  return visible;
}

export function attentionForward(
  q: usize, k: usize, v: usize, bias: usize, out: usize,
  b: i32, tq: i32, tk: i32, ks: i32, hq: i32, hkv: i32, d: i32, scale: f32,
  scratch: usize, scratchBytes: usize, tid: i32, nthreads: i32,
): void {
  // The score row, after four zero floats (the head `probabilities` reads when it sums from the end).
  const p = scratch + <usize>tid * scratchBytes + 16;
  v128.store(p - 16, f32x4.splat(0));
  const rows = b * tq * hq;
  const vstride = <usize>(hkv * d) << 2;
  for (let r = tid; r < rows; r += nthreads) {
    const h = r % hq;
    const i = (r / hq) % tq;
    const bi = r / (hq * tq);
    const o = out + (<usize>(r * d) << 2);
    const visible = probabilities(q, k, bias, p, tq, tk, ks, hq, hkv, d, scale, bi, i, h);
    const vp = v + (<usize>((bi * ks * hkv + h / (hq / hkv)) * d) << 2);
    // out = sum over j in order of p_j v_j, 16 columns at a time in registers (4 at a time past a multiple of 16).
    let e = 0;
    for (; e + 16 <= d; e += 16) weighted16(p, vp + (<usize>e << 2), vstride, visible, o + (<usize>e << 2));
    for (; e < d; e += 4) {
      let acc = f32x4.splat(0);
      let vj = vp + (<usize>e << 2);
      for (let j = 0; j < visible; j++) {
        acc = madd(f32x4.splat(load<f32>(p + (<usize>j << 2))), v128.load(vj), acc);
        vj += vstride;
      }
      v128.store(o + (<usize>e << 2), acc);
    }
  }
}

/** dst[0 .. 16) = sum over j < n, in order, of p[j] * v[j * stride + 0 .. 16), from 0 (one multiply-add a step). */
@inline function weighted16(p: usize, v: usize, stride: usize, n: i32, dst: usize): void {
  let a0 = f32x4.splat(0), a1 = f32x4.splat(0), a2 = f32x4.splat(0), a3 = f32x4.splat(0);
  for (let j = 0; j < n; j++) {
    const pj = v128.load32_splat(p + (<usize>j << 2));
    a0 = madd(pj, v128.load(v), a0);
    a1 = madd(pj, v128.load(v, 16), a1);
    a2 = madd(pj, v128.load(v, 32), a2);
    a3 = madd(pj, v128.load(v, 48), a3);
    v += stride;
  }
  v128.store(dst, a0);
  v128.store(dst, a1, 16);
  v128.store(dst, a2, 32);
  v128.store(dst, a3, 48);
}

/**
 * Floats of per-thread scratch the kernels need: four zeros, then a score row of ks floats (padded to fours), then
 * the backward's row of dS.
 */
export function attentionScratchFloats(ks: i32): i32 {
  return 4 + 2 * ((ks + 3) & ~3);
}

/**
 * dS = P (dP - rowsum(dO * O)) with dP = dO V^T; dq = scale dS K, dk = scale dS^T Q and dv = P^T dO summed over
 * the query heads of a group. One thread owns all of a (batch, key/value head) pair. Every key row a key (tk = ks).
 */
export function attentionBackward(
  q: usize, k: usize, v: usize, bias: usize, out: usize, dOut: usize, dq: usize, dk: usize, dv: usize,
  b: i32, t: i32, hq: i32, hkv: i32, d: i32, scale: f32,
  scratch: usize, scratchBytes: usize, tid: i32, nthreads: i32,
): void {
  // The score row, after four zero floats (the head `probabilities` reads when it sums from the end).
  const p = scratch + <usize>tid * scratchBytes + 16;
  v128.store(p - 16, f32x4.splat(0));
  const ds = p + (<usize>((t + 3) & ~3) << 2);
  const group = hq / hkv;
  const kstride = <usize>(hkv * d) << 2;

  for (let pair = tid; pair < b * hkv; pair += nthreads) {
    const bi = pair / hkv;
    const kh = pair % hkv;
    const kbase = <usize>((bi * t * hkv + kh) * d) << 2;
    for (let j = 0; j < t; j++) {
      const o = kbase + <usize>j * kstride;
      for (let e = 0; e < d; e += 4) {
        v128.store(dk + o + (<usize>e << 2), f32x4.splat(0));
        v128.store(dv + o + (<usize>e << 2), f32x4.splat(0));
      }
    }
    for (let h = kh * group; h < (kh + 1) * group; h++) {
      for (let i = 0; i < t; i++) {
        const qo = <usize>(((bi * t + i) * hq + h) * d) << 2;
        for (let e = 0; e < d; e += 4) v128.store(dq + qo + (<usize>e << 2), f32x4.splat(0));
        // (A masked query keeps dq 0; the loop below writes the others whole.)
        const visible = probabilities(q, k, bias, p, t, t, t, hq, hkv, d, scale, bi, i, h);
        if (visible == 0) continue;
        const delta = dot(dOut + qo, out + qo, d);
        // Every key's dS first (a row after p's), then the rows by columns, 4 at a time: dq's in registers over the
        // keys, dk's and dv's rows updated in place. Each entry's terms come in the same order as key by key.
        for (let j = 0; j < visible; j++) {
          const pj = load<f32>(p + (<usize>j << 2));
          const dp = dot(dOut + qo, v + kbase + <usize>j * kstride, d);
          store<f32>(ds + (<usize>j << 2), pj * (dp - delta) * scale);
        }
        for (let e = 0; e < d; e += 4) {
          const eo = <usize>e << 2;
          const qe = v128.load(q + qo + eo);
          const ge = v128.load(dOut + qo + eo);
          let acc = f32x4.splat(0);
          let ko = kbase + eo;
          for (let j = 0; j < visible; j++) {
            const dsj = v128.load32_splat(ds + (<usize>j << 2));
            acc = madd(dsj, v128.load(k + ko), acc);
            v128.store(dk + ko, madd(dsj, qe, v128.load(dk + ko)));
            v128.store(dv + ko, madd(v128.load32_splat(p + (<usize>j << 2)), ge, v128.load(dv + ko)));
            ko += kstride;
          }
          v128.store(dq + qo + eo, acc);
        }
      }
    }
  }


}
