// put_along_axis_add, the adjoint of take_along_axis, out viewed as [outer, len, inner]:
//   out[o, r, k] = sum over j with idx[o, j, k] == r of upd[o, j, k]
// WGSL has no float atomics, so each thread owns one output element and sums the updates whose index hits it,
// in index order: duplicates sum deterministically, in the reference kernel's order. T is f32 or i32.

alias T = {{T}};

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let t = i / params.inner;
  let r = i32(t % params.len);
  let o = t / params.len;
  var acc = T(0);
  for (var j = 0u; j < params.n; j++) {
    let p = (o * params.n + j) * params.inner + k;
    if (idx[p] == r) {
      acc += upd[p];
    }
  }
  out[i] = acc;
}
