// scatter_links.wgsl's row lists for many indices, in windows: `window` scans idx[q0 .. q1) only, so no
// invocation loops more than q1 - q0 times (Mesa's llvmpipe ends a loop after about 65,535 iterations without an
// error). links is [len row heads | n nexts | n "an earlier index has my row" flags], all -1 beforehand (a flag
// becomes 1). Windows run in increasing q, so the first match a thread finds is the nearest one; `heads`
// then writes links[idx[j]] = j for each j that no earlier index shares a row with.

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn window(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = thread_index(gid);
  if (j >= params.n) {
    return;
  }
  let r = idx[j];
  if (links[params.len + j] == -1) {
    for (var q = max(j + 1u, params.q0); q < params.q1; q++) {
      if (idx[q] == r) {
        links[params.len + j] = i32(q);
        break;
      }
    }
  }
  let flag = params.len + params.n + j;
  if (links[flag] == -1) {
    for (var q = params.q0; q < min(j, params.q1); q++) {
      if (idx[q] == r) {
        links[flag] = 1;
        break;
      }
    }
  }
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn heads(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = thread_index(gid);
  if (j >= params.n) {
    return;
  }
  let r = idx[j];
  if (r >= 0 && u32(r) < params.len && links[params.len + params.n + j] == -1) {
    links[u32(r)] = i32(j);
  }
}
