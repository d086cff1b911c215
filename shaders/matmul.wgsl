// Batched matmul C[b] = op(A[b]) op(B[b]), op = identity or transpose, register-blocked and tiled:
// a workgroup of WG_X x WG_Y threads computes a TM x TN tile of C, each thread an RM x RN block (RN a multiple of
// 4: whole vec4 columns) held in registers. The K loop walks TK-deep tiles of A and B staged in workgroup
// memory, both stored k-major with 4 rows (A) or 4 columns (B) per vec4, so the inner product step is
//   a = As[k][my 4 rows], b = Bs[k][my 4 columns], acc[row r] += a[r] * b   (4 vec4 FMAs per 2 loads).
// src/backends/webgpu/kernels/matmul-program.ts describes the kernel (bindings A, B, C as f32 or vec4<f32>: vec4
// when the contiguous dimension is a multiple of 4; params M, N, K and up to 4 broadcast batch dims, outermost
// first and padded with 1, with A's and B's element strides over them; the workgroup size) and fills the
// placeholders:
//   RM, RN, TK: the block per thread and the depth of a K tile;
//   SPREAD: whether a thread's RN / 4 vec4 columns are adjacent (false) or spread WG_X vec4s apart (true: the
//     threads of a row then read consecutive vec4s of Bs, no bank conflicts, and write consecutive vec4s of C);
//   LOAD_A, LOAD_B: the statements staging one tile (with or without bounds checks, transposed or not);
//   PREFETCH: whether the next tile is read into registers while this one is multiplied: REGS declares them,
//     FETCH_A, FETCH_B read a tile into them, PUT_A, PUT_B store them into the tile (empty when PREFETCH is off);
//   STORE: writing the block back (with or without bounds checks);
//   SPLIT_K: the K range of this workgroup: all of K, or (split-K, a partial product per chunk of K) the chunk
//     wg.z selects beside its batch entry; C is then [batch, splits, M, N], summed by matmul_split_sum.wgsl.
// Bounds checks are compiled out (a separate pipeline) when M, N and K divide the tile.
// Shapes and batch strides are uniforms, so one pipeline serves every size.

const RM: u32 = {{RM}}u;
const RN: u32 = {{RN}}u;
const TK: u32 = {{TK}}u;
const TM: u32 = WG_Y * RM;
const TN: u32 = WG_X * RN;
const TM4: u32 = TM / 4u;
const TN4: u32 = TN / 4u;
const RN4: u32 = RN / 4u;
const RM4: u32 = RM / 4u;
const SPREAD: bool = {{SPREAD}};
const PREFETCH: bool = {{PREFETCH}};
{{REGS}}

// The tile's vec4 column holding this thread's j-th vec4 of outputs.
fn col4(x: u32, j: u32) -> u32 {
  if (SPREAD) {
    return j * WG_X + x;
  }
  return x * RN4 + j;
}

// The end of this workgroup's K range, k_hi, for the loaders' bounds checks (the row strides stay params.K); a
// private variable is not uniform to WGSL's analysis, so the tile loop counts from k_hi itself.
var<private> k_end: u32;

var<workgroup> As: array<vec4<f32>, TK * TM4>; // As[k * TM4 + m / 4][m % 4] = op(A)[m0 + m, k0 + k]
var<workgroup> Bs: array<vec4<f32>, TK * TN4>; // Bs[k * TN4 + n / 4][n % 4] = op(B)[k0 + k, n0 + n]

fn load_a(a_off: u32, m0: u32, k0: u32, tid: u32) {
{{LOAD_A}}
}

fn load_b(b_off: u32, n0: u32, k0: u32, tid: u32) {
{{LOAD_B}}
}

fn fetch_a(a_off: u32, m0: u32, k0: u32, tid: u32) {
{{FETCH_A}}
}

fn fetch_b(b_off: u32, n0: u32, k0: u32, tid: u32) {
{{FETCH_B}}
}

fn put_a(m0: u32, k0: u32, tid: u32) {
{{PUT_A}}
}

fn put_b(n0: u32, k0: u32, tid: u32) {
{{PUT_B}}
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let tid = lid.y * WG_X + lid.x;
  let m0 = wg.y * TM;
  let n0 = wg.x * TN;
  var rem = wg.z;
{{SPLIT_K}}
  var a_off = 0u;
  var b_off = 0u;
  for (var d = 4u; d > 0u; d--) {
    let size = params.batch[d - 1u];
    let c = rem % size;
    rem = rem / size;
    a_off += c * params.a_stride[d - 1u];
    b_off += c * params.b_stride[d - 1u];
  }
  // acc[r * RN4 + j]: row lid.y * RM + r, columns 4 col4(lid.x, j) .. +3
  var acc: array<vec4<f32>, RM * RN4>;
  let tiles = (k_hi - k_lo + TK - 1u) / TK;
  if (PREFETCH) {
    fetch_a(a_off, m0, k_lo, tid);
    fetch_b(b_off, n0, k_lo, tid);
  }
  for (var t = 0u; t < tiles; t++) {
    let k0 = k_lo + t * TK;
    if (PREFETCH) {
      put_a(m0, k0, tid);
      put_b(n0, k0, tid);
    } else {
      load_a(a_off, m0, k0, tid);
      load_b(b_off, n0, k0, tid);
    }
    workgroupBarrier();
    // The next tile's global reads are in flight while this one is multiplied.
    if (PREFETCH && t + 1u < tiles) {
      fetch_a(a_off, m0, k0 + TK, tid);
      fetch_b(b_off, n0, k0 + TK, tid);
    }
    for (var k = 0u; k < TK; k++) {
      var b: array<vec4<f32>, RN4>;
      for (var j = 0u; j < RN4; j++) {
        b[j] = Bs[k * TN4 + col4(lid.x, j)];
      }
      for (var i = 0u; i < RM4; i++) {
        let a = As[k * TM4 + lid.y * RM4 + i];
        for (var j = 0u; j < RN4; j++) {
          acc[(4u * i) * RN4 + j] = fma(vec4<f32>(a.x), b[j], acc[(4u * i) * RN4 + j]);
          acc[(4u * i + 1u) * RN4 + j] = fma(vec4<f32>(a.y), b[j], acc[(4u * i + 1u) * RN4 + j]);
          acc[(4u * i + 2u) * RN4 + j] = fma(vec4<f32>(a.z), b[j], acc[(4u * i + 2u) * RN4 + j]);
          acc[(4u * i + 3u) * RN4 + j] = fma(vec4<f32>(a.w), b[j], acc[(4u * i + 3u) * RN4 + j]);
        }
      }
    }
    workgroupBarrier();
  }
  let c_off = wg.z * params.M * params.N;
  for (var r = 0u; r < RM; r++) {
    let m = m0 + lid.y * RM + r;
    for (var j = 0u; j < RN4; j++) {
      let n = n0 + 4u * col4(lid.x, j);
      let v = acc[r * RN4 + j];
{{STORE}}
    }
  }
}
