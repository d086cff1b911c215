// One token per row of log-probs lp [rows, v], one workgroup of WG threads (a power of two) per row: the kernel
// `sampleTokens`, i.e. the host's chooseToken (src/core/sampling.ts) without a sort and without reading the row
// back.
//
// Greedy: the first argmax, a workgroup tree on (value, id) in which the lower id wins a tie. One pass.
//
// Sampling: p = exp(lp) in f32, put in 64-bit fixed point (vec2<u32>: lo, hi) scaled to the row's largest p
// (`fixed`), so every sum below is exact integer arithmetic, the same in any order, and a histogram's masses
// agree with a walk's to the last unit. A pass reads the row once.
// - topP = 1 (the host's order is the ids'): the argmax (for the scale), then each thread sums a contiguous chunk
//   of ids and a workgroup scan gives each chunk the mass before it; the one thread whose chunk holds
//   floor(u * total) walks it. 3 passes.
// - topP < 1 (the host's order is (p descending, id ascending); here (lp descending, id ascending) on 32-bit
//   order keys of lp, the same order wherever f64 exp separates distinct f32 log-probs): a radix select, 4 bits
//   a pass, with each of 16 bins' mass, count, smallest and largest key and smallest id (private to a thread,
//   then merged with workgroup atomics) finds T, the key of the nucleus' last token (the highest key whose mass
//   from the top, mass(key >= T), reaches floor(topP * total)), and how many of T's ties, in id order, the nucleus
//   takes; a second select, over keys >= T, finds the key of the first token whose cumulative mass exceeds
//   floor(u * kept mass). A pass skips the digits its bucket's keys share and a select stops once its bucket
//   holds a single key, so distinct log-probs take about log16 of the bucket's size passes (at most 8 per
//   select); a key chosen with ties costs one more pass that finds the j-th id holding it. With the argmax and
//   the total: 5 to 10 passes at V = 151,936 on rows of N(0, sigma^2) logits, sigma 4 to 8.
//
// Where the result can differ from the host's f64: (1) p is WGSL's f32 `exp`, within (3 + 2 |lp|) ULP of
// exp(lp), and may flush to 0 below 2^-126; (2) each p is truncated to the fixed point's unit, 2^-frac of the
// largest p's power of two; (3) u and topP are rounded to f32 before the exact floor(u * mass). Every comparison
// of masses is then exact, so the id differs from the host's only when u * kept mass (or topP * total, for the
// nucleus' size) lies within the sum of those errors of a cumulative mass of the order, a CDF boundary, where
// the host's f64 and these numbers may round to different sides. spec/webgpu/sampling.spec.ts computes that
// margin on the host. Rows must be log-probs (exp of their maximum finite in f32); NaN rows are unspecified.

const NONE: u32 = 0xffffffffu;
const BINS: u32 = 16u;

var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;
var<workgroup> scan_lo: array<u32, WG>;
var<workgroup> scan_hi: array<u32, WG>;
var<workgroup> bin_lo: array<atomic<u32>, 16>;
var<workgroup> bin_hi: array<atomic<u32>, 16>;
var<workgroup> bin_count: array<atomic<u32>, 16>;
var<workgroup> bin_kmin: array<atomic<u32>, 16>;
var<workgroup> bin_kmax: array<atomic<u32>, 16>;
var<workgroup> bin_id: array<atomic<u32>, 16>;
var<workgroup> last_with_mass: atomic<u32>;
var<workgroup> top_wg: u32;
var<workgroup> total_wg: vec2<u32>;
var<workgroup> found_id: u32;

// A radix select's state: written by thread 0, read by every thread through workgroupUniformLoad, so the loops
// around barriers stay uniform.
struct Select {
  prefix: u32,
  shift: u32,
  above_lo: u32,
  above_hi: u32,
  done: u32,
  found: u32,
  key: u32,
  count: u32,
  min_id: u32,
}
var<workgroup> sel: Select;

fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn lt64(a: vec2<u32>, b: vec2<u32>) -> bool {
  return a.y < b.y || (a.y == b.y && a.x < b.x);
}

// The full 64-bit product of two u32 (16-bit halves: WGSL has no 64-bit integers).
fn mul32(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// a * n, for a product below 2^64.
fn mul64(a: vec2<u32>, n: u32) -> vec2<u32> {
  let lo = mul32(a.x, n);
  return vec2<u32>(lo.x, lo.y + a.y * n);
}

fn to_f32(a: vec2<u32>) -> f32 {
  return f32(a.y) * 4294967296.0 + f32(a.x);
}

// floor(a * f) for f in [0, 1], exact: f's 24-bit mantissa times a in three words, shifted down.
fn mul_frac(a: vec2<u32>, f: f32) -> vec2<u32> {
  if (f >= 1.0) {
    return a;
  }
  if (!(f > 0.0)) {
    return vec2<u32>(0u, 0u);
  }
  let b = bitcast<u32>(f);
  let e = (b >> 23u) & 0xffu;
  var m = b & 0x7fffffu;
  var s = 149u; // a subnormal f is m 2^-149
  if (e != 0u) {
    m = m | 0x800000u;
    s = 150u - e; // f = m 2^(e - 150); f < 1 makes s >= 24
  }
  let l = mul32(a.x, m);
  let h = mul32(a.y, m);
  let w1 = l.y + h.x;
  let w2 = h.y + select(0u, 1u, w1 < l.y);
  if (s >= 96u) {
    return vec2<u32>(0u, 0u);
  }
  if (s >= 64u) {
    return vec2<u32>(w2 >> (s - 64u), 0u);
  }
  if (s >= 32u) {
    let t = s - 32u;
    if (t == 0u) {
      return vec2<u32>(w1, w2);
    }
    return vec2<u32>((w1 >> t) | (w2 << (32u - t)), w2 >> t);
  }
  return vec2<u32>((l.x >> s) | (w1 << (32u - s)), (w1 >> s) | (w2 << (32u - s)));
}

// p >= 0 in the row's fixed point, p / 2^(emax - 127) * 2^frac truncated (emax: the largest p's biased exponent;
// s0 = frac - 23 - emax). Subnormal p count as 0, as a device that flushes them computes them.
fn fixed(p: f32, s0: i32) -> vec2<u32> {
  let b = bitcast<u32>(p);
  let e = (b >> 23u) & 0xffu;
  if (e == 0u || e == 255u || (b >> 31u) != 0u) {
    return vec2<u32>(0u, 0u);
  }
  let m = (b & 0x7fffffu) | 0x800000u;
  let s = i32(e) + s0;
  if (s <= -24) {
    return vec2<u32>(0u, 0u);
  }
  if (s < 0) {
    return vec2<u32>(m >> u32(-s), 0u);
  }
  if (s == 0) {
    return vec2<u32>(m, 0u);
  }
  if (s < 32) {
    return vec2<u32>(m << u32(s), m >> u32(32 - s));
  }
  return vec2<u32>(0u, m << u32(s - 32));
}

// A u32 whose unsigned order is x's order as an f32 (-0 and +0 one key: exp makes them one probability).
fn order_key(x: f32) -> u32 {
  var b = bitcast<u32>(x);
  if (b == 0x80000000u) {
    b = 0u;
  }
  return select(b | 0x80000000u, ~b, (b >> 31u) != 0u);
}

fn from_key(k: u32) -> f32 {
  return bitcast<f32>(select(~k, k & 0x7fffffffu, (k >> 31u) != 0u));
}

// Inclusive prefix sums of one 64-bit value per thread (Hillis-Steele); the total goes to `total_wg`. Starts
// with a barrier of its own (see row_reduce.wgsl on llvmpipe).
fn scan64(lid: u32, x: vec2<u32>) -> vec2<u32> {
  workgroupBarrier();
  scan_lo[lid] = x.x;
  scan_hi[lid] = x.y;
  workgroupBarrier();
  var acc = x;
  for (var w = 1u; w < WG; w = w << 1u) {
    var left = vec2<u32>(0u, 0u);
    if (lid >= w) {
      left = vec2<u32>(scan_lo[lid - w], scan_hi[lid - w]);
    }
    workgroupBarrier();
    acc = add64(acc, left);
    scan_lo[lid] = acc.x;
    scan_hi[lid] = acc.y;
    workgroupBarrier();
  }
  if (lid == WG - 1u) {
    total_wg = acc;
  }
  return acc;
}

fn reaches(above: vec2<u32>, p: vec2<u32>, n: u32, goal: vec2<u32>, strict: bool) -> bool {
  let m = add64(above, mul64(p, n));
  return select(!lt64(m, goal), lt64(goal, m), strict);
}

// The smallest n in [1, limit] with above + n p >= goal (strict: > goal), else limit: how many ties of one
// key the walk takes. An f32 estimate, then exact steps.
fn ties_needed(above: vec2<u32>, p: vec2<u32>, limit: u32, goal: vec2<u32>, strict: bool) -> u32 {
  var n = 1u;
  if (p.x != 0u || p.y != 0u) {
    n = u32(clamp(to_f32(sub64(goal, above)) / to_f32(p), 1.0, f32(limit)));
  }
  loop {
    if (n > 1u && reaches(above, p, n - 1u, goal, strict)) {
      n = n - 1u;
    } else {
      break;
    }
  }
  loop {
    if (n < limit && !reaches(above, p, n, goal, strict)) {
      n = n + 1u;
    } else {
      break;
    }
  }
  return n;
}

// Thread 0, after a histogram: from the highest bin down, the first whose mass with everything above it reaches
// the goal; done when that bin holds one key, else the next pass starts at the bucket's highest differing bit.
fn choose(goal: vec2<u32>, strict: bool) {
  var above = vec2<u32>(sel.above_lo, sel.above_hi);
  var d = BINS;
  loop {
    if (d == 0u) {
      break;
    }
    d = d - 1u;
    let n = atomicLoad(&bin_count[d]);
    if (n == 0u) {
      continue;
    }
    let with_d = add64(above, vec2<u32>(atomicLoad(&bin_lo[d]), atomicLoad(&bin_hi[d])));
    if (select(!lt64(with_d, goal), lt64(goal, with_d), strict)) {
      let kmin = atomicLoad(&bin_kmin[d]);
      let kmax = atomicLoad(&bin_kmax[d]);
      sel.above_lo = above.x;
      sel.above_hi = above.y;
      if (kmin == kmax) {
        sel.done = 1u;
        sel.found = 1u;
        sel.key = kmin;
        sel.count = n;
        sel.min_id = atomicLoad(&bin_id[d]);
      } else {
        let hb = firstLeadingBit(kmin ^ kmax);
        sel.shift = hb - hb % 4u;
        sel.prefix = kmin;
      }
      return;
    }
    above = with_d;
  }
  sel.done = 1u; // no key reaches it (a strict goal at the whole mass): found stays 0
}

// Over keys >= low: the highest key K whose mass(keys >= K) reaches the goal (strict: exceeds it), with
// mass(keys > K) (`above`), K's count and its smallest id.
fn radix_select(lid: u32, base: u32, v: u32, s0: i32, goal: vec2<u32>, strict: bool, low: u32) -> Select {
  workgroupBarrier();
  if (lid == 0u) {
    sel = Select(0u, 28u, 0u, 0u, 0u, 0u, 0u, 0u, 0u);
  }
  var st = workgroupUniformLoad(&sel);
  loop {
    if (st.done != 0u) {
      break;
    }
    for (var d = lid; d < BINS; d += WG) {
      atomicStore(&bin_lo[d], 0u);
      atomicStore(&bin_hi[d], 0u);
      atomicStore(&bin_count[d], 0u);
      atomicStore(&bin_kmin[d], NONE);
      atomicStore(&bin_kmax[d], 0u);
      atomicStore(&bin_id[d], NONE);
    }
    workgroupBarrier();
    var m_lo: array<u32, 16>;
    var m_hi: array<u32, 16>;
    var n: array<u32, 16>;
    var kmin: array<u32, 16>;
    var kmax: array<u32, 16>;
    var first: array<u32, 16>;
    let high = st.shift + 4u;
    for (var j = lid; j < v; j += WG) {
      let x = lp[base + j];
      let k = order_key(x);
      if (k >= low && (high >= 32u || (k >> high) == (st.prefix >> high))) {
        let d = (k >> st.shift) & 15u;
        let p = fixed(exp(x), s0);
        let lo = m_lo[d] + p.x;
        m_hi[d] = m_hi[d] + p.y + select(0u, 1u, lo < p.x);
        m_lo[d] = lo;
        if (n[d] == 0u) {
          kmin[d] = k;
          kmax[d] = k;
          first[d] = j;
        } else {
          kmin[d] = min(kmin[d], k);
          kmax[d] = max(kmax[d], k);
        }
        n[d] = n[d] + 1u;
      }
    }
    for (var d = 0u; d < BINS; d++) {
      if (n[d] != 0u) {
        let old = atomicAdd(&bin_lo[d], m_lo[d]);
        atomicAdd(&bin_hi[d], m_hi[d] + select(0u, 1u, old + m_lo[d] < old));
        atomicAdd(&bin_count[d], n[d]);
        atomicMin(&bin_kmin[d], kmin[d]);
        atomicMax(&bin_kmax[d], kmax[d]);
        atomicMin(&bin_id[d], first[d]);
      }
    }
    workgroupBarrier();
    if (lid == 0u) {
      choose(goal, strict);
    }
    st = workgroupUniformLoad(&sel);
  }
  return st;
}

// The id of the j-th token (1-based, in id order) whose order key is `key`: chunk counts, a scan, one walk.
fn nth_with_key(lid: u32, base: u32, v: u32, key: u32, j: u32) -> u32 {
  let chunk = (v + WG - 1u) / WG;
  let c0 = min(v, lid * chunk);
  let c1 = min(v, c0 + chunk);
  var n = 0u;
  for (var i = c0; i < c1; i++) {
    if (order_key(lp[base + i]) == key) {
      n = n + 1u;
    }
  }
  let incl = scan64(lid, vec2<u32>(n, 0u)).x;
  let excl = incl - n;
  if (excl < j && j <= incl) {
    var seen = excl;
    for (var i = c0; i < c1; i++) {
      if (order_key(lp[base + i]) == key) {
        seen = seen + 1u;
        if (seen == j) {
          found_id = i;
          break;
        }
      }
    }
  }
  return workgroupUniformLoad(&found_id);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let v = params.v;
  let base = row * v;
  if (lid == 0u) {
    atomicStore(&last_with_mass, 0u);
  }

  // The first argmax: greedy's answer, and the largest p's power of two for the fixed point.
  var best = 0.0;
  var best_id = NONE;
  for (var j = lid; j < v; j += WG) {
    let x = lp[base + j];
    if (best_id == NONE || x > best) {
      best = x;
      best_id = j;
    }
  }
  red_v[lid] = best;
  red_i[lid] = best_id;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      let x = red_v[lid + w];
      let i = red_i[lid + w];
      if (i != NONE && (red_i[lid] == NONE || x > red_v[lid] || (x == red_v[lid] && i < red_i[lid]))) {
        red_v[lid] = x;
        red_i[lid] = i;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    top_wg = red_i[0];
  }
  let top = workgroupUniformLoad(&top_wg);
  if (params.greedy != 0u) {
    if (lid == 0u) {
      ids[row] = i32(top);
      chosen[row] = lp[base + top];
    }
    return;
  }
  let emax = i32((bitcast<u32>(exp(lp[base + top])) >> 23u) & 0xffu);
  let s0 = i32(params.frac) - 23 - emax;

  // Each thread's contiguous chunk of ids summed; the scan gives the mass before each chunk, and the total.
  let chunk = (v + WG - 1u) / WG;
  let c0 = min(v, lid * chunk);
  let c1 = min(v, c0 + chunk);
  var own = vec2<u32>(0u, 0u);
  var last = 0u;
  for (var j = c0; j < c1; j++) {
    let p = fixed(exp(lp[base + j]), s0);
    own = add64(own, p);
    if (p.x != 0u || p.y != 0u) {
      last = j + 1u;
    }
  }
  atomicMax(&last_with_mass, last);
  let incl = scan64(lid, own);
  let total = workgroupUniformLoad(&total_wg);

  if (params.truncate == 0u) {
    // In id order: the first id whose cumulative mass exceeds floor(u * total).
    let goal = mul_frac(total, draws[row]);
    let excl = sub64(incl, own);
    if (lt64(goal, incl) && !lt64(goal, excl)) {
      var cum = excl;
      var id = c1 - 1u; // reached only if exp gave this walk other values than the sum (it is deterministic)
      for (var j = c0; j < c1; j++) {
        cum = add64(cum, fixed(exp(lp[base + j]), s0));
        if (lt64(goal, cum)) {
          id = j;
          break;
        }
      }
      ids[row] = i32(id);
      chosen[row] = lp[base + id];
    }
    if (lid == 0u && !lt64(goal, total)) {
      // u rounded to 1 in f32 (or a row without mass): the last token with any mass.
      let after = atomicLoad(&last_with_mass);
      let id = select(0u, after - 1u, after > 0u);
      ids[row] = i32(id);
      chosen[row] = lp[base + id];
    }
    return;
  }

  // The nucleus: its last key T and how many of T's ties (in id order) it takes, then its kept mass.
  let nucleus = mul_frac(total, params.top_p);
  let t = radix_select(lid, base, v, s0, nucleus, false, 0u);
  let above_t = vec2<u32>(t.above_lo, t.above_hi);
  let p_t = fixed(exp(from_key(t.key)), s0);
  let c = ties_needed(above_t, p_t, t.count, nucleus, false);
  let kept = add64(above_t, mul64(p_t, c));
  // The walk in the nucleus' order: the first token whose cumulative mass exceeds floor(u * kept). When none
  // does (u rounded to 1), the nucleus' last token.
  let goal = mul_frac(kept, draws[row]);
  let k = radix_select(lid, base, v, s0, goal, true, t.key);
  var key = t.key;
  var j = c;
  var first_id = t.min_id;
  if (k.found != 0u) {
    key = k.key;
    first_id = k.min_id;
    let limit = select(k.count, c, k.key == t.key);
    j = ties_needed(vec2<u32>(k.above_lo, k.above_hi), fixed(exp(from_key(key)), s0), limit, goal, true);
  }
  var id = first_id;
  if (j > 1u) {
    id = nth_with_key(lid, base, v, key, j);
  }
  if (lid == 0u) {
    ids[row] = i32(id);
    chosen[row] = lp[base + id];
  }
}
