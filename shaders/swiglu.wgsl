// SwiGLU's gate: out = silu(gate) * up elementwise. Needs prelude.wgsl (prepended). Bindings, params and
// workgroup size: its program record in src/backends/webgpu/kernels/fused.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
  let x = gate[i];
  out[i] = x * safe_sigmoid(x) * up[i];
}
