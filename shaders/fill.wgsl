// Fill a buffer with one 32-bit pattern (an f32 or i32 value's bits): zeros, ones, full().
struct Params {
  n: u32,
  wgx: u32,
  bits: u32,
  _pad: u32,
};

@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> params: Params;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * params.wgx;
  if (i < params.n) {
    out[i] = params.bits;
  }
}
