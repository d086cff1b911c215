// Rotate-half RoPE of one or two tensors sharing their angles (a layer's queries and keys): x_k [rows, H_k, D]
// with cos/sin [rows, D/2]; one thread per (tensor, row, head, pair i): (x1 c - x2 s, x2 c + x1 s) for
// x1 = x[.., i], x2 = x[.., i + D/2]; sign = -1 rotates back (the adjoint).

const PAIR: bool = {{PAIR}};

struct Params {
  n0: u32, // rows * heads0 * half
  n1: u32, // rows * heads1 * half (PAIR)
  heads0: u32,
  heads1: u32,
  half: u32,
  grid_x: u32,
  sign: f32,
  _pad: u32,
};

@group(0) @binding(0) var<storage, read> cos_t: array<f32>;
@group(0) @binding(1) var<storage, read> sin_t: array<f32>;
{{BINDINGS}}

fn rotate(t: u32, heads: u32) -> vec4<f32> {
  let i = t % params.half;
  let row = t / params.half / heads;
  let c = cos_t[row * params.half + i];
  let s = params.sign * sin_t[row * params.half + i];
  return vec4<f32>(c, s, 0.0, 0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let t = gid.x + gid.y * params.grid_x;
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
