// The generic broadcasting elementwise kernel. src/backends/webgpu/kernels/elementwise.ts generates one
// program per (expression, dtypes, how each input is indexed, collapsed rank) from this template; shapes and
// strides are uniforms, so one pipeline serves every size. Input k (binding in<k>) is read
//   contiguously (same layout as the output: in[i]),
//   as a scalar (one element broadcast everywhere: in[off]), or
//   through broadcast strides (in[off + sum(coord[d] * stride[d])], stride 0 on broadcast axes).
// Inputs are a list with names, so a chain of elementwise ops can later be fused into one expression.
//
// Placeholders: RANK the collapsed output rank, OFFSETS the strided offset computation, LOADS one `let` per
// input, EXPR the expression. The uniforms (its program record): n, grid_x, then the output shape (8 dims) and,
// per input, a block of 3 vec4s: its offset (word 0), then its 8 strides.

fn dim(d: u32) -> u32 {
  return params.shape[d / 4u][d % 4u];
}

fn in_offset(k: u32) -> u32 {
  return params.operands[3u * k].x;
}

fn in_stride(k: u32, d: u32) -> u32 {
  return params.operands[3u * k + 1u + d / 4u][d % 4u];
}

const RANK: u32 = {{RANK}}u;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
{{OFFSETS}}
{{LOADS}}
  out[i] = {{EXPR}};
}
