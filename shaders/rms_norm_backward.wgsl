// The backward of RMSNorm (rms_norm.wgsl), in two dispatches:
//   rms_norm_backward_rows:  one workgroup per row: dx = r (dy w - xhat mean(dy w xhat)), xhat = x r;
//                            stores r per row.
//   rms_norm_backward_cols:  one thread per column j: dw[j] = sum over rows of dy x r.
// Needs row_reduce.wgsl and norm_rows.wgsl (prepended). Both entry points use the same bindings.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn rms_norm_backward_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.d;
  let r = inv_rms(lid, base);
  var dot = 0.0;
  for (var j = lid; j < params.d; j += WG) {
    dot += dy[base + j] * w[j] * x[base + j] * r;
  }
  let mean_dot = wg_sum(lid, dot) / f32(params.d);
  for (var j = lid; j < params.d; j += WG) {
    let xhat = x[base + j] * r;
    dx[base + j] = r * (dy[base + j] * w[j] - xhat * mean_dot);
  }
  if (lid == 0u) {
    stats[row] = r;
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn rms_norm_backward_cols(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = thread_index(gid);
  if (j >= params.d) {
    return;
  }
  var acc = 0.0;
  for (var row = 0u; row < params.rows; row++) {
    let p = row * params.d + j;
    acc += dy[p] * x[p] * stats[row];
  }
  dw[j] = acc;
}
