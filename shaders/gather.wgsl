// Indexing reads on 32-bit words (any 4-byte dtype); x is viewed as [outer, len, inner] around the axis.
//   gather:            out[o, j, k] = x[o, idx[j], k]        (embedding lookup; idx has any shape, n values)
//   take_along_axis:   out[o, j, k] = x[o, idx[o, j, k], k]  (picked log-probs; idx has x's rank, n on the axis)
// An out-of-range index reads 0, as the reference kernel.

struct Params {
  outer: u32,
  len: u32,
  inner: u32,
  n: u32,
  total: u32,
  grid_x: u32,
  _pad0: u32,
  _pad1: u32,
};

@group(0) @binding(0) var<storage, read> x: array<u32>;
@group(0) @binding(1) var<storage, read> idx: array<i32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
@group(0) @binding(3) var<uniform> params: Params;

fn read_x(o: u32, r: i32, k: u32) -> u32 {
  if (r < 0 || u32(r) >= params.len) {
    return 0u;
  }
  return x[(o * params.len + u32(r)) * params.inner + k];
}

@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let t = i / params.inner;
  let j = t % params.n;
  let o = t / params.n;
  out[i] = read_x(o, idx[j], k);
}

@compute @workgroup_size(256)
fn take_along_axis(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let o = i / params.inner / params.n;
  out[i] = read_x(o, idx[i], k);
}
