// LayerNorm over the last axis (d), population variance: y = (x - mu) r w + b, r = 1 / sqrt(var + eps).
// One workgroup per row; mean and variance in two passes, as the CPU kernel. The backward is
// layer_norm_backward.wgsl. Needs row_reduce.wgsl (prepended).

struct Params {
  rows: u32,
  d: u32,
  eps: f32,
  grid_x: u32,
};

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

// (mean, 1 / sqrt(var + eps)) of one row.
fn moments(lid: u32, base: u32) -> vec2<f32> {
  let n = f32(params.d);
  var s = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    s += x[base + j];
  }
  let mu = wg_sum(lid, s) / n;
  var v = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    let c = x[base + j] - mu;
    v += c * c;
  }
  let variance = wg_sum(lid, v) / n;
  return vec2<f32>(mu, 1.0 / sqrt(variance + params.eps));
}

@compute @workgroup_size(64)
fn layer_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x + wg.y * params.grid_x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let m = moments(lid, base);
  for (var j = lid; j < params.d; j += WG) {
    y[base + j] = (x[base + j] - m.x) * m.y * w[j] + b[j];
  }
}
