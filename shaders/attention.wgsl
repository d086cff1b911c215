// Causal attention forward, flash-style (FlashAttention-2, Dao 2023, Algorithm 1): one workgroup per (tile of
// ROWS queries, query head, batch row); SPLIT threads share a query row, each taking every SPLIT-th key and
// keeping its own running max m, sum l and output accumulator in registers while the workgroup streams tiles of
// TK keys/values through workgroup memory; the parts are merged at the end (attention_split.wgsl). Scores are never stored. Layout: q and out [B, Tq, Hq, D], k and v [B, Ks, Hkv, D], bias [B, Ks] of
// which the first Tk rows are keys (Ks > Tk: a preallocated KV cache). Query i sees keys 0 .. i + Tk - Tq;
// query head h reads key/value head h / (Hq / Hkv) (grouped-query).
// A query whose own key is masked (bias <= MASKED) outputs 0, as sdpa gives a padding query. Needs
// attention_tiles.wgsl and attention_split.wgsl (prepended, with their constants, D, TK and MASKED); bindings, params and workgroup size:
// the program records of src/backends/webgpu/kernels/attention.ts.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let b = wg.z;
  let h = wg.y;
  let r = lid % ROWS;
  let part = lid / ROWS;
  let i = wg.x * ROWS + r;
  let kh = h / (params.hq / params.hkv);
  let offset = params.tk - params.tq;
  let live = i < params.tq;
  let qo = ((b * params.tq + min(i, params.tq - 1u)) * params.hq + h) * D;
  var qv: array<DV, DN>;
  var acc: array<DV, DN>;
  for (var e = 0u; e < DN; e++) {
    qv[e] = ld_q(qo + e * VW);
    acc[e] = DV(0.0);
  }
  var m = -3.0e38;
  var l = 0.0;
  // Keys visible to the tile's last query bound the loop (uniform across the workgroup).
  let key_end = min(wg.x * ROWS + ROWS, params.tq) + offset;
  for (var j0 = 0u; j0 < key_end; j0 += TK) {
    load_kv_tiles(b, kh, j0, lid);
    let visible = i + offset + 1u;
    if (live && j0 < visible) {
      let n = min(TK, visible - j0);
      for (var jj = part; jj < n; jj += SPLIT) {
        var s = 0.0;
        for (var e = 0u; e < DN; e++) {
          s += dotv(qv[e], k_tile[jj * DN + e]);
        }
        s = s * params.scale;
        if (params.has_bias != 0u) {
          s += bias[b * params.ks + j0 + jj];
        }
        let m_new = max(m, s);
        let corr = exp(m - m_new);
        let p = exp(s - m_new);
        l = l * corr + p;
        for (var e = 0u; e < DN; e++) {
          acc[e] = acc[e] * corr + p * v_tile[jj * DN + e];
        }
        m = m_new;
      }
    }
  }
  // Each part's accumulator rescaled to the row's max, then summed into part 0's.
  let row = merge_max_sum(r, part, m, l);
  let own = exp(m - row.x);
  for (var e = 0u; e < DN; e++) {
    acc[e] *= own;
  }
  merge_sum(r, part, &acc);
  if (live && part == 0u) {
    let masked = params.has_bias != 0u && bias[b * params.ks + i + offset] <= MASKED;
    for (var e = 0u; e < DN; e++) {
      st_out(qo + e * VW, select(acc[e] / row.y, DV(0.0), masked));
    }
  }
}
