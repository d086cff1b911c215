// Numerically stable softmax / log-softmax along one axis of x viewed as [outer, len, inner], as the reference
// kernel: m = max, s = sum(exp(x - m)), then exp(x - m) / s or (x - m) - log(s). LOG picks log-softmax.
//   softmax_tree: inner == 1: one workgroup per row, max and sum by workgroup-shared trees.
//   softmax_loop: one thread per (o, k) line, three passes.
// Needs row_reduce.wgsl (prepended).

const LOG: bool = {{LOG}};

struct Params {
  outer: u32,
  len: u32,
  inner: u32,
  grid_x: u32,
};

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

fn finish(v: f32, m: f32, s: f32) -> f32 {
  if (LOG) {
    return (v - m) - log(s);
  }
  return exp(v - m) / s;
}

@compute @workgroup_size(64)
fn softmax_tree(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x + wg.y * params.grid_x;
  if (row >= params.outer) {
    return;
  }
  let base = row * params.len;
  var m = neg_inf();
  for (var j = lid; j < params.len; j += WG) {
    m = max(m, x[base + j]);
  }
  m = wg_max(lid, m);
  var s = 0.0;
  for (var j = lid; j < params.len; j += WG) {
    s += exp(x[base + j] - m);
  }
  s = wg_sum(lid, s);
  for (var j = lid; j < params.len; j += WG) {
    out[base + j] = finish(x[base + j], m, s);
  }
}

@compute @workgroup_size(64)
fn softmax_loop(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
  if (i >= params.outer * params.inner) {
    return;
  }
  let o = i / params.inner;
  let k = i % params.inner;
  let base = o * params.len * params.inner + k;
  var m = neg_inf();
  for (var j = 0u; j < params.len; j++) {
    m = max(m, x[base + j * params.inner]);
  }
  var s = 0.0;
  for (var j = 0u; j < params.len; j++) {
    s += exp(x[base + j * params.inner] - m);
  }
  for (var j = 0u; j < params.len; j++) {
    out[base + j * params.inner] = finish(x[base + j * params.inner], m, s);
  }
}
