// Batched matmul without workgroup memory: each thread computes an RM x RN block of C (RN a multiple of 4)
// in registers, reading its operands straight from the storage buffers, four k at a time:
//   b[i][j] = op(B)[k + i, n + 4j .. n + 4j + 3]   (vec4 rows of op(B))
//   a       = op(A)[m + r, k .. k + 3]             (a vec4 along k; loaded four rows at a time, transposed in
//                                                  registers when A is stored transposed)
//   acc[r][j] += a.x b[0][j] + a.y b[1][j] + a.z b[2][j] + a.w b[3][j]
// This is the variant for CPU-emulated adapters (Mesa llvmpipe): there workgroup memory is ordinary memory,
// so staging tiles in it (matmul.wgsl) only adds copies and barriers; on a GPU the tiled kernel is used.
// src/backends/webgpu/kernels/matmul-program.ts describes the kernel (bindings, params and workgroup size as
// matmul.wgsl's) and fills RM, RN, the loaders (transposed or not, vec4 or scalar, with bounds checks unless
// M, N, K divide the block) and the store.

const RM: u32 = {{RM}}u;
const RN: u32 = {{RN}}u;
const RN4: u32 = RN / 4u;

// op(A)[m + c, k .. k + 3] for c = 0..3, as four vec4 rows.
fn load_a(a_off: u32, m: u32, k: u32) -> array<vec4<f32>, 4> {
{{LOAD_A}}
}

// op(B)[k + i, n .. n + 3] for i = 0..3, as four vec4 rows.
fn load_b(b_off: u32, k: u32, n: u32) -> array<vec4<f32>, 4> {
{{LOAD_B}}
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let m0 = gid.y * RM;
  let n0 = gid.x * RN;
  if (m0 >= params.M || n0 >= params.N) {
    return;
  }
  var rem = gid.z;
  var a_off = 0u;
  var b_off = 0u;
  for (var d = 4u; d > 0u; d--) {
    let size = params.batch[d - 1u];
    let c = rem % size;
    rem = rem / size;
    a_off += c * params.a_stride[d - 1u];
    b_off += c * params.b_stride[d - 1u];
  }
  var acc: array<vec4<f32>, RM * RN4>;
  for (var k = 0u; k < params.K; k += 4u) {
    var b: array<vec4<f32>, 4u * RN4>;
    for (var j = 0u; j < RN4; j++) {
      let rows = load_b(b_off, k, n0 + 4u * j);
      b[j] = rows[0];
      b[RN4 + j] = rows[1];
      b[2u * RN4 + j] = rows[2];
      b[3u * RN4 + j] = rows[3];
    }
    for (var q = 0u; q < RM / 4u; q++) {
      let a4 = load_a(a_off, m0 + 4u * q, k);
      for (var c = 0u; c < 4u; c++) {
        let a = a4[c];
        let r = 4u * q + c;
        for (var j = 0u; j < RN4; j++) {
          var s = acc[r * RN4 + j];
          s = fma(vec4<f32>(a.x), b[j], s);
          s = fma(vec4<f32>(a.y), b[RN4 + j], s);
          s = fma(vec4<f32>(a.z), b[2u * RN4 + j], s);
          s = fma(vec4<f32>(a.w), b[3u * RN4 + j], s);
          acc[r * RN4 + j] = s;
        }
      }
    }
  }
  let c_off = gid.z * params.M * params.N;
  for (var r = 0u; r < RM; r++) {
    let m = m0 + r;
    for (var j = 0u; j < RN4; j++) {
      let n = n0 + 4u * j;
      let v = acc[r * RN4 + j];
{{STORE}}
    }
  }
}
