// Causal attention backward, part 2 (FlashAttention-2, Dao 2023, Algorithm 2, the dK/dV half): SPLIT threads
// per key row of one key/value head (each taking every SPLIT-th query of a tile, merged at the end through
// attention_split.wgsl), summing over the query heads of its group_size and over the queries that see
// the key (i >= j - (Tk - Tq)), with tiles of TK queries (q, dO, and their m, l and delta from `stats`) through
// workgroup memory: dV = P^T dO, dK = scale dS^T Q with P = exp(S - m) / l, dS = P (dO V^T - delta). The
// constants D and TK and attention_split.wgsl are prepended; bindings, params and workgroup size: the program records of
// src/backends/webgpu/kernels/attention.ts.

var<workgroup> q_tile: array<DV, TK * DN>;
var<workgroup> do_tile: array<DV, TK * DN>;
var<workgroup> m_tile: array<f32, TK>;
var<workgroup> l_tile: array<f32, TK>;
var<workgroup> delta_tile: array<f32, TK>;

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let b = wg.z;
  let kh = wg.y;
  let r = lid % ROWS;
  let part = lid / ROWS;
  let j = wg.x * ROWS + r;
  let group_size = params.hq / params.hkv;
  let offset = params.tk - params.tq;
  let live = j < params.tk;
  let ko = ((b * params.ks + min(j, params.tk - 1u)) * params.hkv + kh) * D;
  var kv: array<DV, DN>;
  var vv: array<DV, DN>;
  var dkv: array<DV, DN>;
  var dvv: array<DV, DN>;
  for (var e = 0u; e < DN; e++) {
    kv[e] = ld_k(ko + e * VW);
    vv[e] = ld_v(ko + e * VW);
    dkv[e] = DV(0.0);
    dvv[e] = DV(0.0);
  }
  var kb = 0.0;
  if (params.has_bias != 0u && live) {
    kb = bias[b * params.ks + j];
  }
  // The first query that sees the tile's first key (uniform across the workgroup).
  let first_key = wg.x * ROWS;
  var i_start = 0u;
  if (first_key > offset) {
    i_start = first_key - offset;
  }
  let rows = params.b * params.hq * params.tq;
  for (var g = 0u; g < group_size; g++) {
    let h = kh * group_size + g;
    for (var i0 = i_start; i0 < params.tq; i0 += TK) {
      workgroupBarrier();
      for (var e = lid; e < TK * DN; e += WG) {
        let i = i0 + e / DN;
        var qq = DV(0.0);
        var dd = DV(0.0);
        if (i < params.tq) {
          let off = ((b * params.tq + i) * params.hq + h) * D + (e % DN) * VW;
          qq = ld_q(off);
          dd = ld_d_o(off);
        }
        q_tile[e] = qq;
        do_tile[e] = dd;
      }
      for (var r = lid; r < TK; r += WG) {
        let i = i0 + r;
        var mx = 0.0;
        var sum = 1.0;
        var delta = 0.0;
        if (i < params.tq) {
          let row = (b * params.hq + h) * params.tq + i;
          mx = stats[row];
          sum = stats[rows + row];
          delta = stats[2u * rows + row];
        }
        m_tile[r] = mx;
        l_tile[r] = sum;
        delta_tile[r] = delta;
      }
      workgroupBarrier();
      if (live) {
        for (var ii = part; ii < TK; ii += SPLIT) {
          let i = i0 + ii;
          if (i >= params.tq || i + offset < j) {
            continue;
          }
          var s = 0.0;
          var dp = 0.0;
          for (var e = 0u; e < DN; e++) {
            s += dotv(q_tile[ii * DN + e], kv[e]);
            dp += dotv(do_tile[ii * DN + e], vv[e]);
          }
          s = s * params.scale + kb;
          let p = exp(s - m_tile[ii]) / l_tile[ii];
          let ds = p * (dp - delta_tile[ii]);
          for (var e = 0u; e < DN; e++) {
            dvv[e] += p * do_tile[ii * DN + e];
            dkv[e] += ds * q_tile[ii * DN + e];
          }
        }
      }
    }
  }
  merge_sum(r, part, &dkv);
  merge_sum(r, part, &dvv);
  if (live && part == 0u) {
    for (var e = 0u; e < DN; e++) {
      st_dk(ko + e * VW, dkv[e] * params.scale);
      st_dv(ko + e * VW, dvv[e]);
    }
  }
}
