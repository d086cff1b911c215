// Workgroup-shared tree reductions for row kernels (softmax, RMSNorm, LayerNorm, token log-probs): WG threads per
// workgroup (a power of two, the program's workgroup size), one row per workgroup. Call from uniform control
// flow; the result is returned to every thread.
// Each call starts with a barrier of its own: on llvmpipe (Mesa 22.3) a second call's first store to `red`
// otherwise raced with the previous call's final read of red[0] (a variance read a partly overwritten mean),
// although a barrier separates them in the source.

var<workgroup> red: array<f32, WG>;

fn wg_sum(lid: u32, v: f32) -> f32 {
  workgroupBarrier();
  red[lid] = v;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      red[lid] = red[lid] + red[lid + w];
    }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

fn wg_max(lid: u32, v: f32) -> f32 {
  workgroupBarrier();
  red[lid] = v;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      red[lid] = max(red[lid], red[lid + w]);
    }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

fn neg_inf() -> f32 {
  var bits = 0xff800000u;
  return bitcast<f32>(bits);
}
