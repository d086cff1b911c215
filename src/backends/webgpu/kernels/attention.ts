import type { KernelTensor } from '../../../core/backend.js';
import { MASKED_KEY_BIAS, registerKernels } from '../../../core/kernels.js';
import { BackendError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import attentionSrc from '../../../../shaders/attention.wgsl';
import decodeSrc from '../../../../shaders/attention_decode.wgsl';
import dqSrc from '../../../../shaders/attention_backward_dq.wgsl';
import dkvSrc from '../../../../shaders/attention_backward_dkv.wgsl';
import splitSrc from '../../../../shaders/attention_split.wgsl';
import tilesSrc from '../../../../shaders/attention_tiles.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { launch, type LaunchCall } from '../launch.js';
import { cachedProgram, checkInputs, type Program, type ProgramRecord } from '../program.js';
import { fillInto } from './movement.js';
import { agreeWithin, pickLaunch, scratchValues } from './tune.js';

/**
 * Fused causal attention (shaders/attention*.wgsl): one forward dispatch, and a backward in two (dQ with the
 * row statistics, then dK/dV). Rows of queries (or keys) per workgroup, SPLIT threads a row (attention_split.wgsl);
 * key/query tiles of TK rows of D floats, TK (at most 64) chosen so that two tiles, the dK/dV kernel's 3 TK row
 * statistics and the parts' merge fit the device's workgroup memory (16 KiB at WebGPU's default limit). The
 * kernels share one uniform record, one prefix of constants and (forward and dQ) one tile loader,
 * attention_tiles.wgsl.
 */
export interface AttentionSplit {
  /** Query (or key) rows per workgroup. */
  readonly rows: number;
  /** Threads per row, each taking every SPLIT-th key (or query). */
  readonly split: number;
}

/**
 * The shapes of work of the three tiled kernels, tuned per class (kernels/tune.ts), the default first. One thread
 * a row: 64 rows, 32 (more workgroups for short sequences) or 128 (a tile shared by more rows); those agree
 * exactly (a thread's arithmetic does not depend on the rows). On an H200 the time fell with the threads a
 * workgroup (1.73, 0.77 and 0.50 ms for 32, 64 and 128 rows at d64, 8 heads, 16 x 256 tokens: loading tiles and
 * one long serial chain a thread, not arithmetic), hence the split candidates: 2 to 8 threads a row, whose sums
 * merge in another order (within the tuner's tolerance). Each is a correctness case of fused.spec.ts.
 */
export const ATTENTION_SPLITS: readonly AttentionSplit[] = [
  { rows: 64, split: 1 },
  { rows: 32, split: 1 },
  { rows: 128, split: 1 },
  { rows: 64, split: 2 },
  { rows: 64, split: 4 },
  { rows: 32, split: 4 },
  { rows: 32, split: 8 },
  { rows: 128, split: 2 },
];
const DEFAULT_SPLIT = ATTENTION_SPLITS[0]!;

/** A candidate's name in the tuner's report: its rows, and `x` its threads a row when more than one. */
export const attentionSplitName = (c: AttentionSplit): string =>
  c.split === 1 ? String(c.rows) : `${c.rows}x${c.split}`;

let forcedSplit: AttentionSplit | null = null;
/** Force the shape of work of the tiled attention kernels (the specs of each candidate) where the device can run
 * it (workgroup limits, memory, loop budget), else the first it can; null: the tuner's. */
export function setAttentionSplit(split: AttentionSplit | null): void {
  forcedSplit = split;
}

/** Multiply-adds of Q K^T below which a class is not tuned. */
const TUNE_MIN_MACS = 2 ** 20;

/**
 * Split candidates add a row's terms in another order: allow an f32 rounding of a term (each at most about 2 on
 * the trial's scratch values) per row walked, as the matmul's tuner does per K.
 */
const splitAgree = (x: Dims) => agreeWithin(Math.max(1e-5, 2e-6 * rowsWalked(x)), 1e-4);

const log2Class = (x: number): number => Math.ceil(Math.log2(Math.max(1, x)));

/** Rows whose sums are merged at a time (attention_split.wgsl's MERGE_CHUNK): a small buffer, so tiles stay large. */
const mergeChunk = (c: AttentionSplit): number => Math.min(c.rows, 16);

/**
 * The parts' merge arrays of attention_split.wgsl: MERGE_ROWS (part_m and part_l) and MERGE_SUM (part_sum, in DV
 * elements); one element each with one thread a row.
 */
const mergeOf = (c: AttentionSplit, d: number): { rows: number; sum: number } =>
  c.split === 1 ? { rows: 1, sum: 1 } : { rows: c.rows * c.split, sum: (mergeChunk(c) * d) / (vec4Of(d) ? 4 : 1) };

/** Bytes of a workgroup array of `floats` f32s as WebGPU counts them: rounded up to 16 bytes. */
const arrayBytes = (floats: number): number => Math.ceil((4 * floats) / 16) * 16;

/**
 * Workgroup bytes of the tiled kernels with tiles of `tk` rows, the larger of the forward / dQ kernels' (two tiles
 * of D, the parts' merge: attention_split.wgsl's MERGE_ROWS twice and MERGE_SUM, one element each with one thread
 * a row) and the dK/dV kernel's (two tiles, three row statistics, MERGE_SUM). WebGPU counts each array rounded up
 * to 16 bytes: counted in floats, tiles overflowed the limit by up to 48 bytes at some head sizes (d82 on
 * llvmpipe's 32 KiB: the dK/dV pipeline, 32,800 bytes, failed validation; d32 at the default 16 KiB, d96 at 48 KiB).
 */
function workgroupBytes(tk: number, d: number, c: AttentionSplit): number {
  const merge = mergeOf(c, d);
  const mergeSum = arrayBytes(merge.sum * (vec4Of(d) ? 4 : 1));
  const tiles = 2 * arrayBytes(tk * d);
  return Math.max(tiles + 2 * arrayBytes(merge.rows) + mergeSum, tiles + 3 * arrayBytes(tk) + mergeSum);
}

/** tileOf's answers by workgroup memory limit, head size and candidate (every launch asks). */
const tiles = new Map<string, number>();

/** Key (or query) rows a tile of one of the tiled kernels holds: the most, up to 64, that fit (0: none does). */
function tileOf(rt: GpuRuntime, d: number, c: AttentionSplit): number {
  const limit = rt.device.limits.maxComputeWorkgroupStorageSize;
  const key = `${limit}:${d}:${c.rows}x${c.split}`;
  let tk = tiles.get(key);
  if (tk === undefined) {
    tk = 64;
    while (tk > 0 && workgroupBytes(tk, d, c) > limit) tk--;
    tiles.set(key, tk);
  }
  return tk;
}

/** Whether a device can run a candidate at head size d: its workgroup limits and memory. */
export function attentionSplitRuns(rt: GpuRuntime, d: number, c: AttentionSplit): boolean {
  const limits = rt.device.limits;
  const threads = c.rows * c.split;
  return (
    threads <= limits.maxComputeInvocationsPerWorkgroup &&
    threads <= limits.maxComputeWorkgroupSizeX &&
    tileOf(rt, d, c) >= 1
  );
}

/**
 * Rows (keys or queries) a thread may walk times its vector steps a row (DN: D / 4 in vec4s, else D) on a CPU
 * rasterizer: Mesa's llvmpipe ends an invocation's loops after 65,535 iterations in all, without an error.
 * Measured there with one thread a row: in f32 steps the dQ pass came out NaN from 25,600 (400 keys at d64 or
 * d66, 200 at d128) and was right at 20,480; in vec4 steps still right at 51,200 (3,200 keys at d64).
 */
const LOOP_LIMITED_STEPS = 16_384;

/** The vector steps of a row: D / 4 where D is a multiple of 4, else D. */
const stepsOf = (d: number): number => (vec4Of(d) ? d / 4 : d);

const pastLoopBudget = (rows: number, d: number): BackendError =>
  new BackendError(
    'webgpu',
    `attention over ${rows} rows at head size ${d} is past what one invocation may loop on a CPU rasterizer ` +
      `(llvmpipe ends loops after 65,535 iterations without an error; rows / threads a row x vector steps a row ` +
      `must stay within ${LOOP_LIMITED_STEPS}): use the cpu backend, or shorter sequences`,
  );

/** The most rows one thread of a launch walks: every key (forward, dQ) or every query of its group (dK/dV). */
const rowsWalked = (x: Dims): number => Math.max(x.tk, x.tq * (x.hq / x.hkv));

/** The candidates a device runs for a launch: within its limits, grid and (a CPU rasterizer) its loop budget. */
const splitsFor = (rt: GpuRuntime, x: Dims): AttentionSplit[] =>
  ATTENTION_SPLITS.filter(
    (c) =>
      attentionSplitRuns(rt, x.d, c) &&
      Math.ceil(Math.max(x.tq, x.tk) / c.rows) <= rt.maxWorkgroupsPerDim &&
      (!rt.cpuLike || Math.ceil(rowsWalked(x) / c.split) * stepsOf(x.d) <= LOOP_LIMITED_STEPS),
  );

/** The shape of work for one of the tiled kernels' launches. */
function splitFor<O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  pass: 'forward' | 'dq' | 'dkv',
  x: Dims,
  launchOf: (c: AttentionSplit) => { program: Program; call: LaunchCall<O> },
  scratch?: (input: number, n: number) => Float32Array | null,
): AttentionSplit {
  const candidates = splitsFor(rt, x);
  const fallback = candidates[0];
  if (fallback === undefined) throw pastLoopBudget(rowsWalked(x), x.d);
  if (forcedSplit !== null) return candidates.includes(forcedSplit) ? forcedSplit : fallback;
  if (x.b * x.hq * x.tq * x.tk * x.d < TUNE_MIN_MACS) return fallback;
  const byName = new Map(candidates.map((c) => [attentionSplitName(c), c]));
  const name = pickLaunch(rt, {
    candidates: [...byName.keys()],
    launchOf: (n) => launchOf(byName.get(n)!),
    // `s`: the classes of the split candidates (an older cache's choice among one thread a row is not reused).
    shapeClass: `${pass}:s:d${x.d}:t${x.tile}:q${log2Class(x.tq)}:k${log2Class(x.tk)}:h${log2Class(x.hq)}:g${x.hq / x.hkv}:b${log2Class(x.b)}`,
    agree: splitAgree(x),
    ...(scratch ? { scratch } : {}),
  });
  return byName.get(name) ?? fallback;
}

/** At most this many queries per head use the split-over-keys kernel (attention_decode.wgsl): decoding. */
const DECODE_MAX_QUERIES = 4;

interface Dims {
  readonly b: number;
  readonly tq: number;
  /** Keys visible to the last query. */
  readonly tk: number;
  /** Key rows per batch row in k, v and the bias (tk unless a preallocated KV cache holds more). */
  readonly ks: number;
  readonly hq: number;
  readonly hkv: number;
  readonly d: number;
  readonly tile: number;
}

/** Floats of workgroup memory a kernel may use. */
const workgroupFloats = (rt: GpuRuntime): number => Math.floor(rt.device.limits.maxComputeWorkgroupStorageSize / 4);

function dimsOf(rt: GpuRuntime, kernel: string, q: KernelTensor, k: KernelTensor, keyLength = k.shape[1]!): Dims {
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  const limit = rt.maxWorkgroupsPerDim;
  if (b > limit || hq > limit || Math.ceil(Math.max(tq, k.shape[1]!) / DEFAULT_SPLIT.rows) > limit) {
    throw new BackendError('webgpu', `${kernel}: ${b} rows x ${hq} heads x ${tq} queries exceed the workgroup grid`);
  }
  const tile = Math.max(1, tileOf(rt, d, DEFAULT_SPLIT));
  return { b, tq, tk: keyLength, ks: k.shape[1]!, hq, hkv: k.shape[2]!, d, tile };
}

/** The uniform record of all four kernels. */
const UNIFORMS = {
  tq: 'u32',
  tk: 'u32',
  hq: 'u32',
  hkv: 'u32',
  scale: 'f32',
  has_bias: 'u32',
  b: 'u32',
  ks: 'u32', // key rows per batch row in k, v and bias (a preallocated KV cache's capacity; >= tk)
} as const;

const uniforms = (x: Dims, scale: number, hasBias: boolean) => ({
  tq: x.tq,
  tk: x.tk,
  hq: x.hq,
  hkv: x.hkv,
  scale,
  has_bias: hasBias ? 1 : 0,
  b: x.b,
  ks: x.ks,
});

const QKV = { q: 'f32', k: 'f32', v: 'f32', bias: 'f32' } as const;

/** Whether a head size is read and computed on in vec4s (every D that is a multiple of 4). */
const vec4Of = (d: number): boolean => d % 4 === 0;

/**
 * What the tiled kernels' arithmetic is typed by: `DV` (vec4<f32>, or f32 for a head size not a multiple of 4),
 * `DN` of them a row (`VW` floats each), `dotv`, and per binding a load `ld_<name>(float offset) -> DV` and a
 * store `st_<name>(float offset, DV)` (the bindings stay f32 arrays).
 */
function vectorHelpers(d: number, loads: readonly string[], stores: readonly string[]): string {
  const v = vec4Of(d);
  const lanes = ['x', 'y', 'z', 'w'];
  return [
    `alias DV = ${v ? 'vec4<f32>' : 'f32'};`,
    `const VW: u32 = ${v ? 4 : 1}u;`,
    `const DN: u32 = ${v ? d / 4 : d}u;`,
    `fn dotv(a: DV, b: DV) -> f32 {\n  return ${v ? 'dot(a, b)' : 'a * b'};\n}`,
    ...loads.map(
      (n) =>
        `fn ld_${n}(at: u32) -> DV {\n  return ${v ? `DV(${n}[at], ${n}[at + 1u], ${n}[at + 2u], ${n}[at + 3u])` : `${n}[at]`};\n}`,
    ),
    ...stores.map(
      (n) =>
        `fn st_${n}(at: u32, x: DV) {\n${v ? lanes.map((c, i) => `  ${n}[at + ${i}u] = x.${c};`).join('\n') : `  ${n}[at] = x;`}\n}`,
    ),
  ].join('\n');
}

/** The constants every attention body starts with: head size, mask threshold, and (tiled kernels) the tile's
 * rows, the split's constants and the vector helpers, with attention_split.wgsl after them. */
const constants = (
  d: number,
  tiled?: { tile: number; c: AttentionSplit; loads: readonly string[]; stores: readonly string[] },
): string =>
  [
    `const D: u32 = ${d}u;`,
    `const MASKED: f32 = ${MASKED_KEY_BIAS.toExponential()};`,
    ...(tiled === undefined
      ? []
      : [
          `const TK: u32 = ${tiled.tile}u;`,
          `const ROWS: u32 = ${tiled.c.rows}u;`,
          `const SPLIT: u32 = ${tiled.c.split}u;`,
          `const MERGE_ROWS: u32 = ${mergeOf(tiled.c, d).rows}u;`,
          `const MERGE_CHUNK: u32 = ${mergeChunk(tiled.c)}u;`,
          `const MERGE_SUM: u32 = ${mergeOf(tiled.c, d).sum}u;`,
          vectorHelpers(d, tiled.loads, tiled.stores),
          splitSrc,
        ]),
  ].join('\n');

/** A tiled program's record: its kernel name, constants, workgroup size and cache key from the split. */
function tiledProgram(
  rt: GpuRuntime,
  file: string,
  d: number,
  c: AttentionSplit,
  record: Omit<ProgramRecord, 'workgroupSize'>,
): Program {
  const tile = tileOf(rt, d, c);
  return cachedProgram(`${file}:${d}:${tile}:${c.rows}x${c.split}`, () => {
    // The vector helpers load every f32 input but the bias (and stats, read as rows) and store every output.
    const loads = Object.keys(record.inputs).filter((n) => n !== 'bias' && n !== 'stats');
    const stores = Object.keys(record.outputs).filter((n) => n !== 'stats');
    return {
      ...record,
      workgroupSize: c.rows * c.split,
      body: `${constants(d, { tile, c, loads, stores })}\n${record.body}`,
    };
  });
}

const forwardProgram = (rt: GpuRuntime, d: number, c: AttentionSplit): Program =>
  tiledProgram(rt, 'attention', d, c, {
    name: 'attention',
    inputs: QKV,
    outputs: { out: 'f32' },
    uniforms: UNIFORMS,
    body: `${tilesSrc}\n${attentionSrc}`,
  });

/** S threads keep S accumulators of D floats (and S for a tree) in workgroup memory. */
const decodeProgram = (d: number, split: number): Program =>
  cachedProgram(`attention_decode:${d}:${split}`, () => ({
    name: 'attention',
    inputs: QKV,
    outputs: { out: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: split,
    body: `${constants(d)}\n${vectorHelpers(d, ['q', 'k', 'v'], ['out'])}\n${decodeSrc}`,
  }));

const dqProgram = (rt: GpuRuntime, d: number, c: AttentionSplit): Program =>
  tiledProgram(rt, 'attention_backward_dq', d, c, {
    name: 'attentionBackward',
    inputs: { ...QKV, o: 'f32', d_o: 'f32' },
    outputs: { dq: 'f32', stats: 'f32' },
    uniforms: UNIFORMS,
    body: `${tilesSrc}\n${dqSrc}`,
  });

const dkvProgram = (rt: GpuRuntime, d: number, c: AttentionSplit): Program =>
  tiledProgram(rt, 'attention_backward_dkv', d, c, {
    name: 'attentionBackward',
    inputs: { ...QKV, d_o: 'f32', stats: 'f32' },
    outputs: { dk: 'f32', dv: 'f32' },
    uniforms: UNIFORMS,
    body: dkvSrc,
  });

/** A tiled launch's grid: ROWS rows of `rows` per workgroup, per head and batch row. */
const rowGrid = (rows: number, heads: number, x: Dims, c: AttentionSplit) =>
  ({ workgroups: [Math.ceil(rows / c.rows), heads, x.b] }) as const;

export function attention(
  rt: GpuRuntime,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  bias: KernelTensor | null,
  scale: number,
  keyLength: number,
): GPUBuffer {
  const x = dimsOf(rt, 'attention', q, k, keyLength);
  const common = {
    inputs: [q, k, v, bias ?? q],
    outputs: [sizeOf(q.shape) * 4],
    uniforms: uniforms(x, scale, bias !== null),
  } as const;
  if (x.tq <= DECODE_MAX_QUERIES && x.tk > x.tq) {
    // A thread per query row would leave 60+ of 64 threads idle: split the keys over the workgroup instead.
    const split = Math.max(1, Math.min(64, 2 ** Math.floor(Math.log2(workgroupFloats(rt) / (x.d + 1)))));
    if (rt.cpuLike && Math.ceil(x.tk / split) * stepsOf(x.d) > LOOP_LIMITED_STEPS) throw pastLoopBudget(x.tk, x.d);
    const [out] = launch(rt, decodeProgram(x.d, split), { ...common, grid: { workgroups: [x.tq, x.hq, x.b] } });
    return out;
  }
  const launchOf = (c: AttentionSplit) => ({
    program: forwardProgram(rt, x.d, c),
    call: { ...common, grid: rowGrid(x.tq, x.hq, x, c) },
  });
  const { program, call } = launchOf(splitFor(rt, 'forward', x, launchOf));
  const [out] = launch(rt, program, call);
  return out;
}

export function attentionBackward(
  rt: GpuRuntime,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  bias: KernelTensor | null,
  out: KernelTensor,
  dOut: KernelTensor,
  scale: number,
): [GPUBuffer, GPUBuffer, GPUBuffer] {
  const x = dimsOf(rt, 'attentionBackward', q, k);
  const qkv = [q, k, v, bias ?? q] as const;
  checkInputs(dqProgram(rt, x.d, DEFAULT_SPLIT), 'attentionBackward', [...qkv, out, dOut]);
  const [nq, nk] = [sizeOf(q.shape), sizeOf(k.shape)];
  if (nq === 0) {
    // No queries: nothing reaches the keys (and no keys means no queries, Tq <= Tk).
    return [rt.alloc(0), fillInto(rt, nk * 4, nk, 'f32', 0), fillInto(rt, nk * 4, nk, 'f32', 0)];
  }
  const params = uniforms(x, scale, bias !== null);
  // dQ, and each query row's statistics (m, l, delta) for the dK/dV kernel.
  const dqOf = (c: AttentionSplit) => ({
    program: dqProgram(rt, x.d, c),
    call: {
      inputs: [...qkv, out, dOut],
      outputs: [nq * 4, 3 * x.b * x.hq * x.tq * 4] as const,
      grid: rowGrid(x.tq, x.hq, x, c),
      uniforms: params,
    },
  });
  const dq = dqOf(splitFor(rt, 'dq', x, dqOf));
  const [dQ, stats] = launch(rt, dq.program, dq.call);
  const dkvOf = (c: AttentionSplit) => ({
    program: dkvProgram(rt, x.d, c),
    call: {
      inputs: [...qkv, dOut, stats],
      outputs: [nk * 4, nk * 4] as const,
      grid: rowGrid(x.tk, x.hkv, x, c),
      uniforms: params,
    },
  });
  // Its tuning trial's scratch statistics (m, l, delta per query row) are in [0.5, 1.5): l, a sum of
  // exponentials, is never near 0 there.
  const positive = (i: number, n: number): Float32Array | null =>
    i === 5 ? scratchValues(n, 6).map((v) => v + 1) : null;
  const dkv = dkvOf(splitFor(rt, 'dkv', x, dkvOf, positive));
  const [dK, dV] = launch(rt, dkv.program, dkv.call);
  rt.release(stats);
  return [dQ, dK, dV];
}

registerKernels<GpuBackend>('webgpu', {
  attention: (b, q, k, v, keyBias, scale, keyLength) =>
    asStorage(attention(b.runtime, q, k, v, keyBias, scale, keyLength)),
  attentionBackward: (b, q, k, v, keyBias, out, dOut, scale) => {
    const [dq, dk, dv] = attentionBackward(b.runtime, q, k, v, keyBias, out, dOut, scale);
    return [asStorage(dq), asStorage(dk), asStorage(dv)];
  },
});
