// Indexing reads on 32-bit words (any 4-byte dtype); x is viewed as [outer, len, inner] around the axis.
//   gather:            out[o, j, k] = x[o, idx[j], k]        (embedding lookup; idx has any shape, n values)
//   take_along_axis:   out[o, j, k] = x[o, idx[o, j, k], k]  (picked log-probs; idx has x's rank, n on the axis)
// An out-of-range index reads 0, as the reference kernel.

fn read_x(o: u32, r: i32, k: u32) -> u32 {
  if (r < 0 || u32(r) >= params.len) {
    return 0u;
  }
  return x[(o * params.len + u32(r)) * params.inner + k];
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let t = i / params.inner;
  let j = t % params.n;
  let o = t / params.n;
  out[i] = read_x(o, idx[j], k);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn take_along_axis(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let o = i / params.inner / params.n;
  out[i] = read_x(o, idx[i], k);
}
