// Split-K's second pass (matmul.wgsl with SPLITS > 1 writes a partial product per K chunk, [batch, splits, M N]):
// C[b, i] = the sum of the partials P[b, s, i] in order s = 0 .. splits - 1 (then + D[b, i] when the program binds
// an addend, {{ADDEND}}), a thread per element (or vec4, the
// bindings' element type). Bindings, params and workgroup size: its program record in
// src/backends/webgpu/kernels/matmul.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let t = thread_index(gid);
  if (t >= params.count) {
    return;
  }
  let b = t / params.mn;
  let i = t % params.mn;
  var acc = P[b * params.splits * params.mn + i];
  for (var s = 1u; s < params.splits; s++) {
    acc += P[(b * params.splits + s) * params.mn + i];
  }
  C[t] = acc{{ADDEND}};
}
