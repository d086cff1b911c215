// The backward of RMSNorm (rms_norm.wgsl), in two dispatches:
//   rms_norm_backward_rows:  one workgroup per row: dx = r (dy w - xhat mean(dy w xhat)), xhat = x r;
//                            stores r per row.
//   rms_norm_backward_cols:  one thread per column j: dw[j] = sum over rows of dy x r.
// Needs row_reduce.wgsl and norm_rows.wgsl (prepended). Both entry points use the same bindings.

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> dy: array<f32>;
@group(0) @binding(3) var<storage, read_write> dx: array<f32>;
@group(0) @binding(4) var<storage, read_write> dw: array<f32>;
@group(0) @binding(5) var<storage, read_write> stats: array<f32>; // r per row
@group(0) @binding(6) var<uniform> params: Params;

@compute @workgroup_size(64)
fn rms_norm_backward_rows(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = wg.x + wg.y * params.grid_x;
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

@compute @workgroup_size(64)
fn rms_norm_backward_cols(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = gid.x;
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
