// Causal attention forward for few queries over many keys (KV-cache decoding; flash-decoding's split over keys):
// one workgroup per (query, query head, batch row); its WG threads take keys j = lid, lid + WG, ... of the
// query's visible keys, each with its own running max m, sum l and accumulator, then merge them: M = max m,
// l = sum l exp(m - M), out = sum acc exp(m - M) / l (accumulators through workgroup memory). Same layout and
// bindings and params as attention.wgsl; a query whose own key is masked outputs 0 there too. The constants D
// and MASKED and the vector helpers (DV, dotv, ld_q/k/v, st_out) are prepended; the records are in src/backends/webgpu/kernels/attention.ts.

var<workgroup> part: array<DV, WG * DN>; // WG accumulators of D floats
var<workgroup> red: array<f32, WG>;

fn tree(lid: u32, v: f32, take_max: bool) -> f32 {
  workgroupBarrier();
  red[lid] = v;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      red[lid] = select(red[lid] + red[lid + w], max(red[lid], red[lid + w]), take_max);
    }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let i = wg.x;
  let h = wg.y;
  let b = wg.z;
  let kh = h / (params.hq / params.hkv);
  let qo = ((b * params.tq + i) * params.hq + h) * D;
  let visible = i + params.tk - params.tq + 1u;
  var qv: array<DV, DN>;
  var acc: array<DV, DN>;
  for (var e = 0u; e < DN; e++) {
    qv[e] = ld_q(qo + e * VW);
    acc[e] = DV(0.0);
  }
  var m = -3.0e38;
  var l = 0.0;
  for (var j = lid; j < visible; j += WG) {
    let ko = ((b * params.ks + j) * params.hkv + kh) * D;
    var s = 0.0;
    for (var e = 0u; e < DN; e++) {
      s += dotv(qv[e], ld_k(ko + e * VW));
    }
    s = s * params.scale;
    if (params.has_bias != 0u) {
      s += bias[b * params.ks + j];
    }
    let m_new = max(m, s);
    let corr = exp(m - m_new);
    let p = exp(s - m_new);
    l = l * corr + p;
    for (var e = 0u; e < DN; e++) {
      acc[e] = acc[e] * corr + p * ld_v(ko + e * VW);
    }
    m = m_new;
  }
  let big_m = tree(lid, m, true);
  let f = exp(m - big_m);
  let total = tree(lid, l * f, false);
  for (var e = 0u; e < DN; e++) {
    part[lid * DN + e] = acc[e] * f;
  }
  workgroupBarrier();
  let masked = params.has_bias != 0u && bias[b * params.ks + visible - 1u] <= MASKED;
  for (var e = lid; e < DN; e += WG) {
    var sum = DV(0.0);
    for (var t = 0u; t < WG; t++) {
      sum += part[t * DN + e];
    }
    st_out(qo + e * VW, select(sum / total, DV(0.0), masked));
  }
}
