// AdamW (as adamw.wgsl) over a chunk of up to {{SLOTS}} leaves in one dispatch: slot k has its own sizes and
// decay factor 1 - lr wd_k; thread t updates element t of every slot (2D grid over the largest slot). With
// CLIP, the gradients are first scaled by min(max_norm / (sqrt(sum_sq) + 1e-6), 1) (clip_grad_norm_), where
// sum_sq[0] is the sum of squares of all gradients, computed on the device.

const CLIP: bool = {{CLIP}};

struct Params {
  grid_x: u32,
  lr: f32,
  beta1: f32,
  beta2: f32,
  eps: f32,
  c1: f32,
  c2: f32,
  one_minus_beta1: f32,
  one_minus_beta2: f32,
  max_norm: f32,
  _pad0: u32,
  _pad1: u32,
  slot: array<vec4<u32>, {{SLOTS}}>, // (n, bits of 1 - lr wd, 0, 0)
};

@group(0) @binding(0) var<storage, read> sum_sq: array<f32>;
{{BINDINGS}}
@group(0) @binding({{UNIFORM}}) var<uniform> params: Params;

fn update(gi: f32, mi: f32, vi: f32, pi: f32, decay: f32) -> vec3<f32> {
  let m1 = params.beta1 * mi + params.one_minus_beta1 * gi;
  let v1 = params.beta2 * vi + params.one_minus_beta2 * gi * gi;
  return vec3<f32>(pi * decay - params.lr * (m1 / params.c1) / (sqrt(v1 / params.c2) + params.eps), m1, v1);
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
  var scale = 1.0;
  if (CLIP) {
    scale = min(params.max_norm / (sqrt(sum_sq[0]) + 1e-6), 1.0);
  }
  {{BODY}}
}
