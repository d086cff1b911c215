// scatter_add.wgsl for more indices than one invocation may loop over on llvmpipe (Mesa ends a loop after about
// 65,535 iterations without an error): each dispatch walks at most `steps` links of a row's list, keeping the sum
// so far in out[i] and where it stopped in cursor[i] (-1: done). `start` begins at the row's head, `resume`
// continues; the host runs `resume` until no list can be longer than the links walked. The sums are those of one
// walk: the same additions in the same order.

alias T = {{T}};

fn walk(i: u32, head: i32, acc0: T) {
  let k = i % params.inner;
  let o = i / params.inner / params.len;
  var acc = acc0;
  var j = head;
  for (var s = 0u; s < params.steps && j >= 0; s++) {
    acc += upd[(o * params.n + u32(j)) * params.inner + k];
    j = links[params.len + u32(j)];
  }
  out[i] = acc;
  cursor[i] = j;
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn start(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total) {
    return;
  }
  walk(i, links[(i / params.inner) % params.len], T(0));
}

@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn resume(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = thread_index(gid);
  if (i >= params.total || cursor[i] < 0) {
    return;
  }
  walk(i, cursor[i], out[i]);
}
