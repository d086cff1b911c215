// Causal attention backward, part 1 (FlashAttention-2, Dao 2023, Algorithm 2, the dQ half): SPLIT threads per
// query row, each taking every SPLIT-th key, tiles of TK keys/values through workgroup memory as in
// attention.wgsl; the parts' (m, l) are merged between the passes and their dQ at the end. Pass 1 recomputes the
// row's max m and sum l; delta = rowsum(dO * O); pass 2: P = exp(S - m) / l, dP = dO V^T, dS = P (dP - delta),
// dQ = scale dS K. m, l and delta go to `stats` ([3, B, Hq, Tq]) for the dK/dV kernel. (Not a single
// log-sum-exp m + log l: for a padding query m is about -1e9, where f32 would drop log l entirely.) A query
// whose own key is masked has output 0: dQ = 0, and m = 3e38 makes its P = 0 in the dK/dV kernel. Needs
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
  var dov: array<DV, DN>;
  var acc: array<DV, DN>;
  var delta = 0.0;
  for (var e = 0u; e < DN; e++) {
    qv[e] = ld_q(qo + e * VW);
    dov[e] = ld_d_o(qo + e * VW);
    delta += dotv(dov[e], ld_o(qo + e * VW));
    acc[e] = DV(0.0);
  }
  let key_end = min(wg.x * ROWS + ROWS, params.tq) + offset;
  let visible = i + offset + 1u;
  var m = -3.0e38;
  var l = 0.0;
  for (var j0 = 0u; j0 < key_end; j0 += TK) {
    load_kv_tiles(b, kh, j0, lid);
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
        l = l * exp(m - m_new) + exp(s - m_new);
        m = m_new;
      }
    }
  }
  let row_ml = merge_max_sum(r, part, m, l);
  m = row_ml.x;
  l = row_ml.y;
  for (var j0 = 0u; j0 < key_end; j0 += TK) {
    load_kv_tiles(b, kh, j0, lid);
    if (live && j0 < visible) {
      let n = min(TK, visible - j0);
      for (var jj = part; jj < n; jj += SPLIT) {
        var s = 0.0;
        var dp = 0.0;
        for (var e = 0u; e < DN; e++) {
          s += dotv(qv[e], k_tile[jj * DN + e]);
          dp += dotv(dov[e], v_tile[jj * DN + e]);
        }
        s = s * params.scale;
        if (params.has_bias != 0u) {
          s += bias[b * params.ks + j0 + jj];
        }
        let ds = exp(s - m) / l * (dp - delta);
        for (var e = 0u; e < DN; e++) {
          acc[e] += ds * k_tile[jj * DN + e];
        }
      }
    }
  }
  merge_sum(r, part, &acc);
  if (live && part == 0u) {
    let masked = params.has_bias != 0u && bias[b * params.ks + i + offset] <= MASKED;
    for (var e = 0u; e < DN; e++) {
      st_dq(qo + e * VW, select(acc[e] * params.scale, DV(0.0), masked));
    }
    let row = (b * params.hq + h) * params.tq + i;
    let rows = params.b * params.hq * params.tq;
    stats[row] = select(m, 3.0e38, masked);
    stats[rows + row] = l;
    stats[2u * rows + row] = delta;
  }
}
