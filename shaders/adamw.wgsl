// One fused AdamW step per element (decoupled weight decay, bias-corrected moments, as PyTorch's AdamW):
//   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2
//   p' = p (1 - lr wd) - lr (m' / c1) / (sqrt(v' / c2) + eps),  c1 = 1 - b1^t, c2 = 1 - b2^t.
// The host computes 1 - b1, 1 - b2, 1 - lr wd, c1 and c2 in double precision: 1 - b2 formed in f32 from
// f32(0.999) is off by 1.3e-5 relative, which the bias correction at step 1 passes straight into the update.
// Inputs are not modified: p', m', v' go to new buffers. Bindings, params and workgroup size: its program record
// in src/backends/webgpu/kernels/adamw.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
  let gi = g[i];
  let mi = params.beta1 * m[i] + params.one_minus_beta1 * gi;
  let vi = params.beta2 * v[i] + params.one_minus_beta2 * gi * gi;
  m_out[i] = mi;
  v_out[i] = vi;
  p_out[i] = p[i] * params.decay - params.lr * (mi / params.c1) / (sqrt(vi / params.c2) + params.eps);
}
