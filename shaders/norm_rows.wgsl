// Shared by the four norm kernels (rms_norm, rms_norm_backward, layer_norm, layer_norm_backward), prepended after
// row_reduce.wgsl: the per-row statistics. Their program records (src/backends/webgpu/kernels/norm.ts) bind the
// input rows as `x` and share one uniform record (rows, d, eps, grid_x).

// RMSNorm's 1 / sqrt(mean(x^2) + eps) of one row.
fn inv_rms(lid: u32, base: u32) -> f32 {
  var ss = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    let v = x[base + j];
    ss += v * v;
  }
  ss = wg_sum(lid, ss);
  return 1.0 / sqrt(ss / f32(params.d) + params.eps);
}

// LayerNorm's (mean, 1 / sqrt(var + eps)) of one row, in two passes as the reference kernel.
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
