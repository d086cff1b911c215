// LayerNorm over the last axis (d), population variance: y = (x - mu) r w + b, r = 1 / sqrt(var + eps).
// One workgroup per row; mean and variance in two passes, as the reference kernel. The backward is
// layer_norm_backward.wgsl. Needs row_reduce.wgsl and norm_rows.wgsl (prepended).

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn layer_norm(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let m = moments(lid, base);
  for (var j = lid; j < params.d; j += WG) {
    y[base + j] = (x[base + j] - m.x) * m.y * w[j] + b[j];
  }
}
