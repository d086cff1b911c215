// LayerNorm over the last axis (d), population variance: y = (x - mu) r w + b, r = 1 / sqrt(var + eps).
// One workgroup per row; mean and variance in two passes, as the reference kernel. The backward is
// layer_norm_backward.wgsl. Needs row_reduce.wgsl and norm_rows.wgsl (prepended).

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

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
