// A residual add and the next RMSNorm in one pass: s = a + b, y = s * r * w with r = 1 / sqrt(mean(s^2) + eps),
// one workgroup per row, summed in rms_norm.wgsl's order (so y equals rms_norm of s). Needs row_reduce.wgsl
// (prepended).

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  var ss = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    let v = a[base + j] + b[base + j];
    s[base + j] = v;
    ss += v * v;
  }
  ss = wg_sum(lid, ss);
  let r = 1.0 / sqrt(ss / f32(params.d) + params.eps);
  for (var j = lid; j < params.d; j += WG) {
    y[base + j] = (a[base + j] + b[base + j]) * r * w[j];
  }
}
