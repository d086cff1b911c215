import type { KernelTensor } from '../../../core/backend.js';
import { MASKED_KEY_BIAS, registerKernels } from '../../../core/kernels.js';
import { BackendError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import attentionSrc from '../../../../shaders/attention.wgsl';
import decodeSrc from '../../../../shaders/attention_decode.wgsl';
import dqSrc from '../../../../shaders/attention_backward_dq.wgsl';
import dkvSrc from '../../../../shaders/attention_backward_dkv.wgsl';
import tilesSrc from '../../../../shaders/attention_tiles.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { launch, type LaunchCall } from '../launch.js';
import { cachedProgram, checkInputs, type Program } from '../program.js';
import { fillInto } from './movement.js';
import { pickWorkgroup, scratchValues } from './tune.js';

/**
 * Fused causal attention (shaders/attention*.wgsl): one forward dispatch, and a backward in two (dQ with the
 * row statistics, then dK/dV). Rows of ROWS queries (or keys) per workgroup; key/query tiles of TK rows of D
 * floats, TK (at most 64) chosen so that two tiles and the dK/dV kernel's 3 TK row statistics fit the device's
 * workgroup memory (16 KiB at WebGPU's default limit). The four kernels share one uniform record, one prefix of
 * constants and (forward and dQ) one tile loader, attention_tiles.wgsl.
 */
const ROWS = 64;

/**
 * Query (or key) rows per workgroup of the three tiled kernels, tuned per class (kernels/tune.ts): 64 (the
 * default), 32 (more workgroups for short sequences) or 128 (a key/value tile shared by more rows). A thread's
 * arithmetic does not depend on it (each owns a row; the tiles are the same TK rows), so the candidates agree
 * exactly; each is a correctness case of fused.spec.ts.
 */
export const ATTENTION_ROWS = [ROWS, 32, 128] as const;

let forcedRows: number | null = null;
/** Force the rows per workgroup of the tiled attention kernels (the specs of each candidate); null: the tuner's. */
export function setAttentionRows(rows: number | null): void {
  forcedRows = rows;
}

/** Multiply-adds of Q K^T below which a class is not tuned. */
const TUNE_MIN_MACS = 2 ** 20;

const log2Class = (x: number): number => Math.ceil(Math.log2(Math.max(1, x)));

/** Rows per workgroup for one of the tiled kernels' launches. */
function rowsFor<O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  pass: 'forward' | 'dq' | 'dkv',
  x: Dims,
  programOf: (rows: number) => Program,
  call: LaunchCall<O>,
  scratch?: (input: number, n: number) => Float32Array | null,
): number {
  if (forcedRows !== null) return forcedRows;
  if (x.b * x.hq * x.tq * x.tk * x.d < TUNE_MIN_MACS) return ROWS;
  // Sizes whose grid would pass the per-dimension limit are not offered.
  const sizes = ATTENTION_ROWS.filter((r) => Math.ceil(Math.max(x.tq, x.tk) / r) <= rt.maxWorkgroupsPerDim);
  return pickWorkgroup(rt, {
    sizes,
    programOf,
    call,
    shapeClass: `${pass}:d${x.d}:t${x.tile}:q${log2Class(x.tq)}:k${log2Class(x.tk)}:h${log2Class(x.hq)}:g${x.hq / x.hkv}:b${log2Class(x.b)}`,
    ...(scratch ? { scratch } : {}),
  });
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
  if (b > limit || hq > limit || Math.ceil(Math.max(tq, k.shape[1]!) / ROWS) > limit) {
    throw new BackendError('webgpu', `${kernel}: ${b} rows x ${hq} heads x ${tq} queries exceed the workgroup grid`);
  }
  const tile = Math.max(1, Math.min(64, Math.floor(workgroupFloats(rt) / (2 * d + 3))));
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

/** The constants every attention body starts with: head size, key tile rows (tiled kernels), mask threshold. */
const constants = (d: number, tile?: number): string =>
  [
    `const D: u32 = ${d}u;`,
    ...(tile === undefined ? [] : [`const TK: u32 = ${tile}u;`]),
    `const MASKED: f32 = ${MASKED_KEY_BIAS.toExponential()};`,
  ].join('\n');

const forwardProgram = (x: Dims, rows: number): Program =>
  cachedProgram(`attention:${x.d}:${x.tile}:${rows}`, () => ({
    name: 'attention',
    inputs: QKV,
    outputs: { out: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: rows,
    body: `${constants(x.d, x.tile)}\n${tilesSrc}\n${attentionSrc}`,
  }));

/** S threads keep S accumulators of D floats (and S for a tree) in workgroup memory. */
const decodeProgram = (d: number, split: number): Program =>
  cachedProgram(`attention_decode:${d}:${split}`, () => ({
    name: 'attention',
    inputs: QKV,
    outputs: { out: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: split,
    body: `${constants(d)}\n${decodeSrc}`,
  }));

const dqProgram = (x: Dims, rows: number): Program =>
  cachedProgram(`attention_backward_dq:${x.d}:${x.tile}:${rows}`, () => ({
    name: 'attentionBackward',
    inputs: { ...QKV, o: 'f32', d_o: 'f32' },
    outputs: { dq: 'f32', stats: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: rows,
    body: `${constants(x.d, x.tile)}\n${tilesSrc}\n${dqSrc}`,
  }));

const dkvProgram = (x: Dims, rows: number): Program =>
  cachedProgram(`attention_backward_dkv:${x.d}:${x.tile}:${rows}`, () => ({
    name: 'attentionBackward',
    inputs: { ...QKV, d_o: 'f32', stats: 'f32' },
    outputs: { dk: 'f32', dv: 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: rows,
    body: `${constants(x.d, x.tile)}\n${dkvSrc}`,
  }));

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
    const [out] = launch(rt, decodeProgram(x.d, split), { ...common, grid: { workgroups: [x.tq, x.hq, x.b] } });
    return out;
  }
  const call = { ...common, grid: { threads: [x.tq, x.hq, x.b] } } as const;
  const programOf = (rows: number): Program => forwardProgram(x, rows);
  const [out] = launch(rt, programOf(rowsFor(rt, 'forward', x, programOf, call)), call);
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
  const qkv = [q, k, v, bias ?? q];
  checkInputs(dqProgram(x, ROWS), 'attentionBackward', [...qkv, out, dOut]);
  const [nq, nk] = [sizeOf(q.shape), sizeOf(k.shape)];
  if (nq === 0) {
    // No queries: nothing reaches the keys (and no keys means no queries, Tq <= Tk).
    return [rt.alloc(0), fillInto(rt, nk * 4, nk, 'f32', 0), fillInto(rt, nk * 4, nk, 'f32', 0)];
  }
  const params = uniforms(x, scale, bias !== null);
  // dQ, and each query row's statistics (m, l, delta) for the dK/dV kernel.
  const dqCall = {
    inputs: [...qkv, out, dOut],
    outputs: [nq * 4, 3 * x.b * x.hq * x.tq * 4],
    grid: { threads: [x.tq, x.hq, x.b] },
    uniforms: params,
  } as const;
  const dqOf = (rows: number): Program => dqProgram(x, rows);
  const [dQ, stats] = launch(rt, dqOf(rowsFor(rt, 'dq', x, dqOf, dqCall)), dqCall);
  const dkvCall = {
    inputs: [...qkv, dOut, stats],
    outputs: [nk * 4, nk * 4],
    grid: { threads: [x.tk, x.hkv, x.b] },
    uniforms: params,
  } as const;
  // Its tuning trial's scratch statistics (m, l, delta per query row) are in [0.5, 1.5): l, a sum of
  // exponentials, is never near 0 there.
  const dkvOf = (rows: number): Program => dkvProgram(x, rows);
  const positive = (i: number, n: number): Float32Array | null =>
    i === 5 ? scratchValues(n, 6).map((v) => v + 1) : null;
  const [dK, dV] = launch(rt, dkvOf(rowsFor(rt, 'dkv', x, dkvOf, dkvCall, positive)), dkvCall);
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
