// The backward of LayerNorm (layer_norm.wgsl), in two dispatches:
//   layer_norm_backward_rows:  one workgroup per row: dx = r (g - mean(g) - xhat mean(g xhat)), g = dy w;
//                              stores (mu, r) per row.
//   layer_norm_backward_cols:  one thread per column j: dw[j] = sum dy xhat, db[j] = sum dy.
// Needs row_reduce.wgsl and norm_rows.wgsl (prepended). Both entry points use the same bindings.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn layer_norm_backward_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let m = moments(lid, base);
  var sg = 0.0;
  var sgx = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    let g = dy[base + j] * w[j];
    sg += g;
    sgx += g * (x[base + j] - m.x) * m.y;
  }
  let n = f32(params.d);
  let mean_g = wg_sum(lid, sg) / n;
  let mean_gx = wg_sum(lid, sgx) / n;
  for (var j = lid; j < params.d; j += WG) {
    let xhat = (x[base + j] - m.x) * m.y;
    dx[base + j] = m.y * (dy[base + j] * w[j] - mean_g - xhat * mean_gx);
  }
  if (lid == 0u) {
    stats[2u * row] = m.x;
    stats[2u * row + 1u] = m.y;
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn layer_norm_backward_cols(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = thread_index(gid);
  if (j >= params.d) {
    return;
  }
  var aw = 0.0;
  var ab = 0.0;
  for (var row = 0u; row < params.rows; row++) {
    let p = row * params.d + j;
    let g = dy[p];
    aw += g * (x[p] - stats[2u * row]) * stats[2u * row + 1u];
    ab += g;
  }
  dw[j] = aw;
  db[j] = ab;
}
