// Reductions along one run of axes: the input is viewed as [outer, R, inner] and reduced over R.
//   reduce_tree: inner == 1, long rows: one workgroup per row, each thread folds a strided slice of the row,
//                then a workgroup-shared tree combines the WG partial states.
//   reduce_loop: one thread per output (o, k), folding the R values x[(o * R + j) * inner + k] in order
//                (coalesced across k when inner > 1; also short rows).
//   split_fold, split_total: rows too long for one workgroup (inner == 1; params.inner holds the parts a row is
//                split into, params.chunk their length): a workgroup per part folds it into a state (the states
//                are the output, one word per state or two for logsumexp's), then a workgroup per row combines
//                its parts' states in order. A thread's loops stay short: Mesa's llvmpipe ends a shader
//                invocation's loops after 65,535 iterations in all (a 4M-element sum came out as 131,070).
// Each op is a fold over a state S: init, acc (fold one value), comb (merge two states), fin (state -> value).
// OP picks sum / max / min / lse; T is the element type. logsumexp keeps (running max m, sum of
// exp(x - m)), rescaled when the max grows, so it needs one pass and never overflows. Bindings (x, out of type
// T), params ([outer, R, inner] and grid_x) and workgroup size: its program record in
// src/backends/webgpu/kernels/reduce.ts.

alias T = {{T}};

fn neg_inf() -> f32 {
  var bits = 0xff800000u;
  return bitcast<f32>(bits);
}

fn lowest() -> T {
  {{LOWEST}}
}

fn highest() -> T {
  {{HIGHEST}}
}

fn sum_init() -> T { return T(0); }
fn sum_acc(s: T, v: T) -> T { return s + v; }
fn sum_comb(a: T, b: T) -> T { return a + b; }
fn sum_fin(s: T) -> T { return s; }

// NaN wins (v != v), as in the reference kernel.
fn max_init() -> T { return lowest(); }
fn max_acc(s: T, v: T) -> T { return select(s, v, v > s || v != v); }
fn max_comb(a: T, b: T) -> T { return max_acc(a, b); }
fn max_fin(s: T) -> T { return s; }

fn min_init() -> T { return highest(); }
fn min_acc(s: T, v: T) -> T { return select(s, v, v < s || v != v); }
fn min_comb(a: T, b: T) -> T { return min_acc(a, b); }
fn min_fin(s: T) -> T { return s; }

fn lse_init() -> vec2<f32> { return vec2<f32>(neg_inf(), 0.0); }
fn lse_acc(s: vec2<f32>, v: f32) -> vec2<f32> {
  if (v == neg_inf()) {
    return s; // exp(-inf) adds nothing
  }
  if (v > s.x) {
    return vec2<f32>(v, s.y * exp(s.x - v) + 1.0);
  }
  return vec2<f32>(s.x, s.y + exp(v - s.x));
}
fn lse_comb(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
  if (b.x == neg_inf()) {
    return a;
  }
  if (a.x == neg_inf()) {
    return b;
  }
  let m = max(a.x, b.x);
  return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}
fn lse_fin(s: vec2<f32>) -> f32 { return s.x + log(s.y); }

alias S = {{S}};

var<workgroup> partial: array<S, WG>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn reduce_tree(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.outer) {
    return;
  }
  let base = row * params.r;
  var s = {{OP}}_init();
  for (var j = lid; j < params.r; j += WG) {
    s = {{OP}}_acc(s, x[base + j]);
  }
  combine_workgroup(lid, s);
  if (lid == 0u) {
    out[row] = {{OP}}_fin(partial[0]);
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn reduce_loop(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.outer * params.inner) {
    return;
  }
  let o = i / params.inner;
  let k = i % params.inner;
  var p = o * params.r * params.inner + k;
  var s = {{OP}}_init();
  for (var j = 0u; j < params.r; j++) {
    s = {{OP}}_acc(s, x[p]);
    p += params.inner;
  }
  out[i] = {{OP}}_fin(s);
}

// A state as the words of the split passes' intermediate buffer.
fn put_state(i: u32, s: S) {
  {{PUT_STATE}}
}
fn get_state(i: u32) -> S {
  {{GET_STATE}}
}

// The tree of reduce_tree, over the workgroup's states; the result in partial[0].
fn combine_workgroup(lid: u32, s: S) {
  partial[lid] = s;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      partial[lid] = {{OP}}_comb(partial[lid], partial[lid + w]);
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn split_fold(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = workgroup_index(wg);
  if (w >= params.outer * params.inner) {
    return;
  }
  let row = w / params.inner;
  let first = (w % params.inner) * params.chunk;
  let end = min(first + params.chunk, params.r);
  var s = {{OP}}_init();
  for (var j = first + lid; j < end; j += WG) {
    s = {{OP}}_acc(s, x[row * params.r + j]);
  }
  combine_workgroup(lid, s);
  if (lid == 0u) {
    put_state(w, partial[0]);
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn split_total(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.outer) {
    return;
  }
  var s = {{OP}}_init();
  for (var p = lid; p < params.inner; p += WG) {
    s = {{OP}}_comb(s, get_state(row * params.inner + p));
  }
  combine_workgroup(lid, s);
  if (lid == 0u) {
    out[row] = {{OP}}_fin(partial[0]);
  }
}
