// Sum of squares over a chunk of up to {{SLOTS}} tensors: workgroup w of this dispatch writes its partial sum
// (grid-strided loops over each tensor, then a workgroup tree) to partials[first + w]; a last pass over the
// partials (sums, not squares) writes the total to out[0]. Deterministic: fixed strides and tree order.

const WG: u32 = 256u;

struct Params {
  first_slot: u32,
  workgroups: u32,
  _pad0: u32,
  _pad1: u32,
  n: array<vec4<u32>, {{SLOT_VEC4S}}>,
};

{{BINDINGS}}
@group(0) @binding({{UNIFORM}}) var<uniform> params: Params;

var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
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
    {{STORE}}
  }
}
