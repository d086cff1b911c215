// The row lists scatter_add.wgsl walks, for n indices into len rows; links[0 .. len) is already -1. Thread j
// writes links[len + j], the next j' > j with idx[j'] == idx[j] (or -1), and, if no earlier index equals its
// own, links[idx[j]] = j (one writer per row). Indices outside [0, len) hit no row. O(n) per thread: for the
// few thousand tokens of a batch, a fraction of the sum it saves (every output scanning all n indices). Past
// LINKS_WINDOW indices, scatter_links_windowed.wgsl does the same a window of q at a time.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = thread_index(gid);
  if (j >= params.n) {
    return;
  }
  let r = idx[j];
  var next = -1;
  for (var q = j + 1u; q < params.n; q++) {
    if (idx[q] == r) {
      next = i32(q);
      break;
    }
  }
  links[params.len + j] = next;
  if (r < 0 || u32(r) >= params.len) {
    return;
  }
  for (var q = 0u; q < j; q++) {
    if (idx[q] == r) {
      return;
    }
  }
  links[u32(r)] = i32(j);
}
