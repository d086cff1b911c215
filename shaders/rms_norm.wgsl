// RMSNorm over the last axis (d): y = x * r * w, r = 1 / sqrt(mean(x^2) + eps). One workgroup per row.
// The backward is rms_norm_backward.wgsl. Needs row_reduce.wgsl and norm_rows.wgsl (prepended).

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn rms_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let r = inv_rms(lid, base);
  for (var j = lid; j < params.d; j += WG) {
    y[base + j] = x[base + j] * r * w[j];
  }
}
