// scatter_add, the adjoint of gather, out viewed as [outer, len, inner]:
//   out[o, r, k] = sum over j with idx[j] == r of upd[o, j, k]
// WGSL has no float atomics, so each thread owns one output element and sums, in index order, the updates whose
// index hits its row: duplicates sum deterministically, in the reference kernel's order. It finds them through
// `links` (scatter_links.wgsl): links[r] is the first j with idx[j] == r (or -1), links[len + j] the next j'
// after j with the same index (or -1), so each output costs the updates of its own row, not all n of them.
// Past LINKS_WINDOW indices scatter_add_windowed.wgsl walks the same lists in bounded parts.
// T is f32 or i32.

alias T = {{T}};

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let t = i / params.inner;
  let r = t % params.len;
  let o = t / params.len;
  var acc = T(0);
  var j = links[r];
  while (j >= 0) {
    acc += upd[(o * params.n + u32(j)) * params.inner + k];
    j = links[params.len + u32(j)];
  }
  out[i] = acc;
}
