// Strided copy of 32-bit words (any 4-byte dtype): for every coordinate c of an iteration shape,
//   dst[dst_off + sum(c[d] * dst_stride[d])] = src[src_off + sum(c[d] * src_stride[d])].
// One kernel serves expand (stride 0 on broadcast axes), permute, slice, pad and concat (writing into a
// region of a larger output). RANK is the iteration rank after merging dims that stay contiguous.
struct Params {
  // [0] n, [1] wgx, [2] src_off, [3] dst_off, [4..12) shape, [12..20) src strides, [20..28) dst strides.
  v: array<vec4<u32>, 7>,
};

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> params: Params;

fn word(i: u32) -> u32 {
  return params.v[i / 4u][i % 4u];
}

const RANK: u32 = {{RANK}}u;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * word(1u);
  if (i >= word(0u)) {
    return;
  }
  var rem = i;
  var s = word(2u);
  var d = word(3u);
  for (var k = RANK; k > 0u; k--) {
    let size = word(3u + k);
    let c = rem % size;
    rem = rem / size;
    s += c * word(11u + k);
    d += c * word(19u + k);
  }
  dst[d] = src[s];
}
