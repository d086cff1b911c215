// The adjoint of swiglu.wgsl: d gate = dy up silu'(gate), d up = dy silu(gate). Needs prelude.wgsl (prepended).
// Bindings, params and workgroup size: its program record in src/backends/webgpu/kernels/fused.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
  let x = gate[i];
  d_gate[i] = dy[i] * up[i] * silu_grad(x);
  d_up[i] = dy[i] * (x * safe_sigmoid(x));
}
