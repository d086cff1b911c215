// The generic broadcasting elementwise kernel. src/backends/webgpu/kernels/elementwise.ts generates one
// pipeline per (expression, dtypes, how each input is indexed, collapsed rank) from this template; shapes and
// strides are uniforms, so one pipeline serves every size. An input is read
//   contiguously (same layout as the output: in[i]),
//   as a scalar (one element broadcast everywhere: in[off]), or
//   through broadcast strides (in[off + sum(coord[d] * stride[d])], stride 0 on broadcast axes).
// Inputs are a list with names, so a chain of elementwise ops can later be fused into one expression.
//
// Placeholders: BINDINGS input declarations, OUT_BINDING/PARAMS_BINDING binding numbers,
// OUT_T the output type, NV uniform vec4 count, RANK the collapsed output rank, OFFSETS the
// strided offset computation, LOADS one `let` per input, EXPR the expression.

struct Params {
  // n: element count; wgx: threads per row of the dispatch grid; then 2 pad words. Then shape (8 dims) and,
  // per input, an offset (word 0 of its block) and 8 strides, packed in vec4s.
  v: array<vec4<u32>, {{NV}}>,
};

{{BINDINGS}}
@group(0) @binding({{OUT_BINDING}}) var<storage, read_write> out: array<{{OUT_T}}>;
@group(0) @binding({{PARAMS_BINDING}}) var<uniform> params: Params;

fn word(i: u32) -> u32 {
  return params.v[i / 4u][i % 4u];
}

// Word layout: [0] n, [1] wgx, [4..12) shape, input k: offset at 12 + 12k, strides at 16 + 12k.
fn dim(d: u32) -> u32 {
  return word(4u + d);
}

fn in_offset(k: u32) -> u32 {
  return word(12u + 12u * k);
}

fn in_stride(k: u32, d: u32) -> u32 {
  return word(16u + 12u * k + d);
}

const RANK: u32 = {{RANK}}u;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * word(1u);
  if (i >= word(0u)) {
    return;
  }
{{OFFSETS}}
{{LOADS}}
  out[i] = {{EXPR}};
}
