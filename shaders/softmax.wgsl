// Numerically stable softmax / log-softmax along one axis of x viewed as [outer, len, inner], as the reference
// kernel: m = max, s = sum(exp(x - m)), then exp(x - m) / s or (x - m) - log(s). LOG picks log-softmax.
//   softmax_tree: inner == 1: one workgroup per row, max and sum by workgroup-shared trees.
//   softmax_loop: one thread per (o, k) line, three passes.
// Needs row_reduce.wgsl (prepended).

const LOG: bool = {{LOG}};

fn finish(v: f32, m: f32, s: f32) -> f32 {
  if (LOG) {
    return (v - m) - log(s);
  }
  return exp(v - m) / s;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn softmax_tree(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
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

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn softmax_loop(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
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
