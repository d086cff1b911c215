// dw[j] = sum over rows of dy[row, j] x[row, j] stats[row] (RMSNorm's weight gradient; stats holds each row's
// 1 / rms), in two passes, so that a few hundred columns over thousands of rows keep the device busy (one thread
// per column, each walking every row, left an H100 nearly idle for 0.5 ms):
//   partial: workgroup (column block wg.x of WG_X columns, row chunk wg.y of params.chunk rows); WG_Y lanes per
//            column stride over the chunk's rows, then a fixed tree over the lanes: partials[chunk, j].
//   total:   one thread per column sums its chunks' partials in chunk order.
// Deterministic: fixed strides, tree and order.

var<workgroup> lanes: array<f32, WG>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn partial(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let j = wg.x * WG_X + lid.x;
  let first = wg.y * params.chunk;
  let end = min(first + params.chunk, params.rows);
  var acc = 0.0;
  if (j < params.d) {
    for (var row = first + lid.y; row < end; row += WG_Y) {
      let p = row * params.d + j;
      acc += dy[p] * x[p] * stats[row];
    }
  }
  let slot = lid.y * WG_X + lid.x;
  lanes[slot] = acc;
  workgroupBarrier();
  for (var w = WG_Y / 2u; w > 0u; w = w >> 1u) {
    if (lid.y < w) {
      lanes[slot] = lanes[slot] + lanes[slot + w * WG_X];
    }
    workgroupBarrier();
  }
  if (lid.y == 0u && j < params.d) {
    partials[wg.y * params.d + j] = lanes[lid.x];
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn total(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let j = wg.x * WG + lid;
  if (j >= params.d) {
    return;
  }
  var acc = 0.0;
  for (var c = 0u; c < params.chunks; c++) {
    acc += partials[c * params.d + j];
  }
  dw[j] = acc;
}
