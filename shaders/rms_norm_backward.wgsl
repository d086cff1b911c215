// The backward of RMSNorm (rms_norm.wgsl), rows first: one workgroup per row: dx = r (dy w - xhat mean(dy w xhat)),
// xhat = x r, plus `prior` when the program binds it ({{PRIOR}}: the cotangent x gathered before, added here
// instead of by a kernel of its own); stores r per row, from which column_sums.wgsl then sums
// dw[j] = sum over rows of dy x r.
// Needs row_reduce.wgsl and norm_rows.wgsl (prepended).

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
    dx[base + j] = r * (dy[base + j] * w[j] - xhat * mean_dot){{PRIOR}};
  }
  if (lid == 0u) {
    stats[row] = r;
  }
}
