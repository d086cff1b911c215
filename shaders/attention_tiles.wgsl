// Shared by the tiled attention kernels that stream keys and values (attention.wgsl and
// attention_backward_dq.wgsl): tiles of TK key rows of D floats of k and v, for key/value head kh of batch row b
// from key j0, through workgroup memory; rows at or past params.tk read as 0 (k, v and the bias hold params.ks
// rows per batch row). Call from uniform control flow: it begins and ends with a barrier.

var<workgroup> k_tile: array<DV, TK * DN>;
var<workgroup> v_tile: array<DV, TK * DN>;

fn load_kv_tiles(b: u32, kh: u32, j0: u32, lid: u32) {
  workgroupBarrier();
  for (var e = lid; e < TK * DN; e += WG) {
    let j = j0 + e / DN;
    var kk = DV(0.0);
    var vv = DV(0.0);
    if (j < params.tk) {
      let o = ((b * params.ks + j) * params.hkv + kh) * D + (e % DN) * VW;
      kk = ld_k(o);
      vv = ld_v(o);
    }
    k_tile[e] = kk;
    v_tile[e] = vv;
  }
  workgroupBarrier();
}
