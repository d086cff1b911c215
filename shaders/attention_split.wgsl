// Shared by the tiled attention kernels (attention.wgsl, attention_backward_dq.wgsl, attention_backward_dkv.wgsl):
// SPLIT threads share one row (a query's keys, or a key's queries, dealt out in turn), so a workgroup of ROWS rows
// has ROWS * SPLIT threads to load tiles and each thread's serial chain is 1/SPLIT as long. Thread lid works on row
// lid % ROWS (a warp's threads share one part, so a tile read is a broadcast) as part lid / ROWS; the parts are
// merged through workgroup memory at the end. With SPLIT = 1 both merges are nothing. The constants SPLIT, ROWS,
// MERGE_ROWS (SPLIT * ROWS, or 1), MERGE_CHUNK (rows merged at a time) and MERGE_SUM (MERGE_CHUNK * D, or 1) are
// prepended. Call from uniform control flow.

var<workgroup> part_m: array<f32, MERGE_ROWS>;
var<workgroup> part_l: array<f32, MERGE_ROWS>;
var<workgroup> part_sum: array<DV, MERGE_SUM>;

// The row's softmax max and sum over every part, from each part's own (m, l) (FlashAttention-2's rescaling,
// Dao 2023, Algorithm 1): every part gets the same (max, sum).
fn merge_max_sum(r: u32, part: u32, m: f32, l: f32) -> vec2<f32> {
  if (SPLIT == 1u) {
    return vec2<f32>(m, l);
  }
  workgroupBarrier();
  part_m[part * ROWS + r] = m;
  part_l[part * ROWS + r] = l;
  workgroupBarrier();
  var mx = part_m[r];
  for (var p = 1u; p < SPLIT; p++) {
    mx = max(mx, part_m[p * ROWS + r]);
  }
  var sum = 0.0;
  for (var p = 0u; p < SPLIT; p++) {
    sum += part_l[p * ROWS + r] * exp(part_m[p * ROWS + r] - mx);
  }
  return vec2<f32>(mx, sum);
}

// Part 0's acc becomes the sum of every part's, added in part order (the others' are left as they were),
// MERGE_CHUNK rows at a time (acc is only ever indexed by the unrolled e, so it stays in registers). Laid out
// [D, MERGE_CHUNK]: the threads of a warp touch consecutive words.
fn merge_sum(r: u32, part: u32, acc: ptr<function, array<DV, DN>>) {
  for (var r0 = 0u; r0 < ROWS; r0 += MERGE_CHUNK) {
    let mine = r >= r0 && r < r0 + MERGE_CHUNK;
    for (var p = 1u; p < SPLIT; p++) {
      workgroupBarrier();
      if (part == p && mine) {
        for (var e = 0u; e < DN; e++) {
          part_sum[e * MERGE_CHUNK + r - r0] = (*acc)[e];
        }
      }
      workgroupBarrier();
      if (part == 0u && mine) {
        for (var e = 0u; e < DN; e++) {
          (*acc)[e] += part_sum[e * MERGE_CHUNK + r - r0];
        }
      }
    }
  }
}
