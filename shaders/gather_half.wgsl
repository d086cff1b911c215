// gather of bf16/f16 storage into f32 (an embedding lookup of a frozen table): x viewed as [outer, len, inner],
//   out[o, j, k] = x[o, idx[j], k], widened as it is read (x_at, from kernels/half.ts; two elements per u32 word).
// An out-of-range index reads 0, as the reference kernel.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  let k = i % params.inner;
  let t = i / params.inner;
  let j = t % params.n;
  let o = t / params.n;
  let r = idx[j];
  if (r < 0 || u32(r) >= params.len) {
    out[i] = 0.0;
    return;
  }
  out[i] = x_at((o * params.len + u32(r)) * params.inner + k);
}
