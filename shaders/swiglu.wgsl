// SwiGLU's gate: out = silu(gate) * up elementwise. Needs prelude.wgsl (prepended).

struct Params {
  n: u32,
  grid_x: u32,
  _pad0: u32,
  _pad1: u32,
};

@group(0) @binding(0) var<storage, read> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.grid_x;
  if (i >= params.n) {
    return;
  }
  let x = gate[i];
  out[i] = x * safe_sigmoid(x) * up[i];
}
