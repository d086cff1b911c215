// Rotate-half RoPE of one or two tensors sharing their angles (a layer's queries and keys): x_k [rows, H_k, D]
// with cos/sin [rows, D/2]; one thread per (tensor, row, head, pair i): (x1 c - x2 s, x2 c + x1 s) for
// x1 = x[.., i], x2 = x[.., i + D/2]; sign = -1 rotates back (the adjoint). Threads [0, n0) rotate x0 into out0,
// [n0, n0 + n1) x1_in into out1 (the second tensor, a program of its own: SECOND is its code, empty without it).
// Bindings, params (n_k = rows * heads_k * half) and workgroup size: its program record in
// src/backends/webgpu/kernels/fused.ts.

fn rotate(t: u32, heads: u32) -> vec4<f32> {
  let i = t % params.half;
  let row = t / params.half / heads;
  let c = cos_t[row * params.half + i];
  let s = params.sign * sin_t[row * params.half + i];
  return vec4<f32>(c, s, 0.0, 0.0);
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let t = thread_index(gid);
  if (t < params.n0) {
    let cs = rotate(t, params.heads0);
    let o = (t / params.half) * 2u * params.half + t % params.half;
    let x1 = x0[o];
    let x2 = x0[o + params.half];
    out0[o] = x1 * cs.x - x2 * cs.y;
    out0[o + params.half] = x2 * cs.x + x1 * cs.y;
    return;
  }
  {{SECOND}}
}
