// Causal attention forward, flash-style (FlashAttention-2, Dao 2023, Algorithm 1): one workgroup per (tile of
// 64 queries, query head, batch row); each thread owns one query row and keeps its running max m, sum l and
// output accumulator in registers while the workgroup streams tiles of TK keys/values through workgroup
// memory. Scores are never stored. Layout: q and out [B, Tq, Hq, D], k and v [B, Ks, Hkv, D], bias [B, Ks] of
// which the first Tk rows are keys (Ks > Tk: a preallocated KV cache). Query i sees keys 0 .. i + Tk - Tq;
// query head h reads key/value head h / (Hq / Hkv) (grouped-query).
// A query whose own key is masked (bias <= MASKED) outputs 0, as sdpa gives a padding query.

const D: u32 = {{D}}u;
const TK: u32 = {{TK}}u;
const WG: u32 = 64u;
const MASKED: f32 = {{MASKED}};

struct Params {
  tq: u32,
  tk: u32,
  hq: u32,
  hkv: u32,
  scale: f32,
  has_bias: u32,
  _pad0: u32,
  ks: u32, // key rows per batch row in k, v and bias (a preallocated KV cache's capacity; >= tk)
};

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> params: Params;

var<workgroup> k_tile: array<f32, {{TILE}}>;
var<workgroup> v_tile: array<f32, {{TILE}}>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let b = wg.z;
  let h = wg.y;
  let i = wg.x * WG + lid;
  let kh = h / (params.hq / params.hkv);
  let offset = params.tk - params.tq;
  let live = i < params.tq;
  let qo = ((b * params.tq + min(i, params.tq - 1u)) * params.hq + h) * D;
  var qv: array<f32, D>;
  var acc: array<f32, D>;
  for (var e = 0u; e < D; e++) {
    qv[e] = q[qo + e];
    acc[e] = 0.0;
  }
  var m = -3.0e38;
  var l = 0.0;
  // Keys visible to the tile's last query bound the loop (uniform across the workgroup).
  let key_end = min(wg.x * WG + WG, params.tq) + offset;
  for (var j0 = 0u; j0 < key_end; j0 += TK) {
    workgroupBarrier();
    for (var e = lid; e < TK * D; e += WG) {
      let j = j0 + e / D;
      var kk = 0.0;
      var vv = 0.0;
      if (j < params.tk) {
        let o = ((b * params.ks + j) * params.hkv + kh) * D + e % D;
        kk = k[o];
        vv = v[o];
      }
      k_tile[e] = kk;
      v_tile[e] = vv;
    }
    workgroupBarrier();
    let visible = i + offset + 1u;
    if (live && j0 < visible) {
      let n = min(TK, visible - j0);
      for (var jj = 0u; jj < n; jj++) {
        var s = 0.0;
        for (var e = 0u; e < D; e++) {
          s += qv[e] * k_tile[jj * D + e];
        }
        s = s * params.scale;
        if (params.has_bias != 0u) {
          s += bias[b * params.ks + j0 + jj];
        }
        let m_new = max(m, s);
        let corr = exp(m - m_new);
        let p = exp(s - m_new);
        l = l * corr + p;
        for (var e = 0u; e < D; e++) {
          acc[e] = acc[e] * corr + p * v_tile[jj * D + e];
        }
        m = m_new;
      }
    }
  }
  if (live) {
    let masked = params.has_bias != 0u && bias[b * params.ks + i + offset] <= MASKED;
    for (var e = 0u; e < D; e++) {
      out[qo + e] = select(acc[e] / l, 0.0, masked);
    }
  }
}
