// Strided copy of 32-bit words (any 4-byte dtype): for every coordinate c of an iteration shape,
//   dst[dst_offset + sum(c[d] * dst_strides[d])] = src[src_offset + sum(c[d] * src_strides[d])].
// One kernel serves expand (stride 0 on broadcast axes), permute, slice, pad and concat (writing into a
// region of a larger output). RANK is the iteration rank after merging dims that stay contiguous. Bindings,
// params (up to 8 dims each) and workgroup size: its program record in src/backends/webgpu/kernels/movement.ts.

const RANK: u32 = {{RANK}}u;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.n) {
    return;
  }
  var rem = i;
  var s = params.src_offset;
  var d = params.dst_offset;
  for (var k = RANK; k > 0u; k--) {
    let a = (k - 1u) / 4u;
    let b = (k - 1u) % 4u;
    let size = params.shape[a][b];
    let c = rem % size;
    rem = rem / size;
    s += c * params.src_strides[a][b];
    d += c * params.dst_strides[a][b];
  }
  dst[d] = src[s];
}
