// One fused AdamW step per element (decoupled weight decay, bias-corrected moments, as PyTorch's AdamW):
//   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2
//   p' = p (1 - lr wd) - lr (m' / c1) / (sqrt(v' / c2) + eps),  c1 = 1 - b1^t, c2 = 1 - b2^t.
// The host computes 1 - b1, 1 - b2, 1 - lr wd, c1 and c2 in double precision: 1 - b2 formed in f32 from
// f32(0.999) is off by 1.3e-5 relative, which the bias correction at step 1 passes straight into the update.
// Inputs are not modified: p', m', v' go to new buffers.

struct Params {
  n: u32,
  grid_x: u32,
  lr: f32,
  beta1: f32,
  beta2: f32,
  eps: f32,
  decay: f32, // 1 - lr * weight_decay
  c1: f32,
  c2: f32,
  one_minus_beta1: f32,
  one_minus_beta2: f32,
  _pad: u32,
};

@group(0) @binding(0) var<storage, read> p: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<storage, read> m: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> p_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> m_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> v_out: array<f32>;
@group(0) @binding(7) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
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
