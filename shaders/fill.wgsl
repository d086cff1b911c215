// Fill a buffer with one 32-bit pattern (an f32 or i32 value's bits): zeros, ones, full(). Bindings, params and
// workgroup size: its program record in src/backends/webgpu/kernels/movement.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i < params.n) {
    out[i] = params.bits;
  }
}
