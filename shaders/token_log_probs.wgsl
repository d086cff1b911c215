// log softmax(scale * logits)[target] per row of V logits, one workgroup per row (max and sum by the
// workgroup trees of row_reduce.wgsl, in the same order as softmax.wgsl's tree, so a separate scale and
// log-softmax give the same numbers). FINISH writes the forward's `out[row]`, or, in the backward's program,
// d logits `dx` = dy scale (onehot(target) - softmax). A target outside [0, V) gives NaN. Needs row_reduce.wgsl
// and prelude.wgsl (prepended).

fn sx(i: u32) -> f32 {
  return params.scale * logits[i];
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = workgroup_index(wg);
  if (row >= params.rows) {
    return;
  }
  let base = row * params.v;
  var m = neg_inf();
  for (var j = lid; j < params.v; j += WG) {
    m = max(m, sx(base + j));
  }
  m = wg_max(lid, m);
  var s = 0.0;
  for (var j = lid; j < params.v; j += WG) {
    s += exp(sx(base + j) - m);
  }
  s = wg_sum(lid, s);
  let t = targets[row];
  let valid = t >= 0 && u32(t) < params.v;
  {{FINISH}}
}
