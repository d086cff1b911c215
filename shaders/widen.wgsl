// cast of bf16/f16 storage to f32: out[i] = x[i] widened (x_at, from kernels/half.ts; two elements per u32 word).

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
  out[i] = x_at(i);
}
