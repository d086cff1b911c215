// RMSNorm over the last axis (d): y = x * r * w, r = 1 / sqrt(mean(x^2) + eps). One workgroup per row.
// The backward is rms_norm_backward.wgsl. Needs row_reduce.wgsl (prepended).

struct Params {
  rows: u32,
  d: u32,
  eps: f32,
  grid_x: u32,
};

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

fn inv_rms(lid: u32, base: u32) -> f32 {
  var ss = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    let v = x[base + j];
    ss += v * v;
  }
  ss = wg_sum(lid, ss);
  return 1.0 / sqrt(ss / f32(params.d) + params.eps);
}

@compute @workgroup_size(64)
fn rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x + wg.y * params.grid_x;
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let r = inv_rms(lid, base);
  for (var j = lid; j < params.d; j += WG) {
    y[base + j] = x[base + j] * r * w[j];
  }
}
