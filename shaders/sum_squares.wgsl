// Sum of squares over a chunk of tensors (bindings x<k>, sizes params.n, 4 per vec4): workgroup w of this
// dispatch writes its partial sum (grid-strided loops over each tensor, then a workgroup tree) to
// out[first_slot + w], its slice of the partials; a last pass over the partials (sums, not squares) writes the
// total to out[0]. BODY is the loops. Deterministic: fixed strides and tree order. The program record is in
// src/backends/webgpu/kernels/multi-tensor.ts.

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  var acc = 0.0;
  let stride = params.workgroups * WG;
  let start = wg.x * WG + lid;
  {{BODY}}
  red[lid] = acc;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      red[lid] = red[lid] + red[lid + w];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    out[params.first_slot + wg.x] = red[0];
  }
}
