// AdamW (as adamw.wgsl) over a chunk of leaves in one dispatch: slot k (bindings p<k>, g<k>, m<k>, v<k> in and
// p<k>_out, m<k>_out, v<k>_out out; a tensor updated in place, donated by the caller, is bound only as its output
// and read from there) has its own size and decay factor 1 - lr wd_k (params.slot[k] = (n, the
// factor's bits)); thread t updates element t of every slot (2D grid over the largest slot). With CLIP, the
// gradients are first scaled by min(max_norm / (sqrt(sum_sq) + 1e-6), 1) (clip_grad_norm_), where sum_sq[0] is
// the sum of squares of all gradients, computed on the device. The step's values (lr, the bias corrections c1 and
// c2, a decayed slot's factor) are uniforms, or with a schedule tensor `sched` = (lr, c1, c2, decay) read from the
// device (STEP_VALUES; a slot's params.slot[k].y is then 1 for a decayed slot, 0 for one not decayed). BODY updates
// each slot; the program record is in src/backends/webgpu/kernels/multi-tensor.ts.

const CLIP: bool = {{CLIP}};

fn update(gi: f32, mi: f32, vi: f32, pi: f32, decay: f32, lr: f32, c1: f32, c2: f32) -> vec3<f32> {
  let m1 = params.beta1 * mi + params.one_minus_beta1 * gi;
  let v1 = params.beta2 * vi + params.one_minus_beta2 * gi * gi;
  return vec3<f32>(pi * decay - lr * (m1 / c1) / (sqrt(v1 / c2) + params.eps), m1, v1);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  var scale = 1.0;
  if (CLIP) {
    scale = min(params.max_norm / (sqrt(sum_sq[0]) + 1e-6), 1.0);
  }
  {{STEP_VALUES}}
  {{BODY}}
}
