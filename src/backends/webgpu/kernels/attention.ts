import type { KernelTensor } from '../../../core/backend.js';
import { MASKED_KEY_BIAS, registerKernels } from '../../../core/kernels.js';
import { BackendError, DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import attentionSrc from '../../../../shaders/attention.wgsl';
import decodeSrc from '../../../../shaders/attention_decode.wgsl';
import dqSrc from '../../../../shaders/attention_backward_dq.wgsl';
import dkvSrc from '../../../../shaders/attention_backward_dkv.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { launchSpec } from '../launch.js';
import { fillTemplate } from '../wgsl.js';
import { Words } from './layout.js';
import { fillInto } from './movement.js';

/**
 * Fused causal attention (shaders/attention*.wgsl): one forward dispatch, and a backward in two (dQ with the
 * row statistics, then dK/dV). Rows of 64 queries (or keys) per workgroup; key/query tiles of TK rows of D
 * floats, TK (at most 64) chosen so that two tiles and the dK/dV kernel's 3 TK row statistics fit the device's
 * workgroup memory (16 KiB at WebGPU's default limit).
 */
const ROWS = 64;
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

function dimsOf(
  rt: GpuRuntime,
  kernel: string,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  bias: KernelTensor | null,
  keyLength = k.shape[1]!,
): Dims {
  for (const t of [q, k, v, ...(bias ? [bias] : [])])
    if (t.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${t.dtype}`);
  const [b, tq, hq, d] = q.shape as [number, number, number, number];
  const limit = rt.maxWorkgroupsPerDim;
  if (b > limit || hq > limit || Math.ceil(Math.max(tq, k.shape[1]!) / ROWS) > limit) {
    throw new BackendError('webgpu', `${kernel}: ${b} rows x ${hq} heads x ${tq} queries exceed the workgroup grid`);
  }
  const tile = Math.max(1, Math.min(64, Math.floor(workgroupFloats(rt) / (2 * d + 3))));
  return { b, tq, tk: keyLength, ks: k.shape[1]!, hq, hkv: k.shape[2]!, d, tile };
}

const uniforms = (x: Dims, scale: number, hasBias: boolean): Uint32Array =>
  new Words(8)
    .u(0, x.tq)
    .u(1, x.tk)
    .u(2, x.hq)
    .u(3, x.hkv)
    .f(4, scale)
    .u(5, hasBias ? 1 : 0)
    .u(6, x.b)
    .u(7, x.ks).u32;

/** The mask threshold (`MASKED_KEY_BIAS`) as a WGSL float literal. */
const MASKED = MASKED_KEY_BIAS.toExponential();

const source = (name: string, src: string, x: Dims) => (): string =>
  fillTemplate(name, src, { D: x.d, TK: x.tile, TILE: x.tile * x.d, MASKED });

export function attention(
  rt: GpuRuntime,
  q: KernelTensor,
  k: KernelTensor,
  v: KernelTensor,
  bias: KernelTensor | null,
  scale: number,
  keyLength: number,
): GPUBuffer {
  const x = dimsOf(rt, 'attention', q, k, v, bias, keyLength);
  const common = {
    kernel: 'attention',
    inputs: [q, k, v, bias ?? q].map((t) => bufferOf(t.storage)),
    outputs: [sizeOf(q.shape) * 4],
    uniforms: uniforms(x, scale, bias !== null),
  } as const;
  if (x.tq <= DECODE_MAX_QUERIES && x.tk > x.tq) {
    // A thread per query row would leave 60+ of 64 threads idle: split the keys over the workgroup instead.
    // S threads keep S accumulators of D floats (and S for a tree) in workgroup memory.
    const split = Math.max(1, Math.min(64, 2 ** Math.floor(Math.log2(workgroupFloats(rt) / (x.d + 1)))));
    const [out] = launchSpec(rt, {
      ...common,
      key: `attention_decode:${x.d}:${split}`,
      source: () => fillTemplate('attention_decode.wgsl', decodeSrc, { D: x.d, S: split, PART: split * x.d, MASKED }),
      grid: { workgroups: [x.tq, x.hq, x.b] },
    });
    return out;
  }
  const [out] = launchSpec(rt, {
    ...common,
    key: `attention:${x.d}:${x.tile}`,
    source: source('attention.wgsl', attentionSrc, x),
    grid: { workgroups: [Math.ceil(x.tq / ROWS), x.hq, x.b] },
  });
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
  const x = dimsOf(rt, 'attentionBackward', q, k, v, bias);
  const [nq, nk] = [sizeOf(q.shape), sizeOf(k.shape)];
  if (nq === 0) {
    // No queries: nothing reaches the keys (and no keys means no queries, Tq <= Tk).
    return [rt.alloc(0), fillInto(rt, nk * 4, nk, 'f32', 0), fillInto(rt, nk * 4, nk, 'f32', 0)];
  }
  const [qb, kb, vb, bb] = [q, k, v, bias ?? q].map((t) => bufferOf(t.storage));
  const common = { kernel: 'attentionBackward', uniforms: uniforms(x, scale, bias !== null) } as const;
  // dQ, and each query row's statistics (m, l, delta) for the dK/dV kernel.
  const [dq, stats] = launchSpec(rt, {
    ...common,
    key: `attention_backward_dq:${x.d}:${x.tile}`,
    source: source('attention_backward_dq.wgsl', dqSrc, x),
    inputs: [qb!, kb!, vb!, bb!, bufferOf(out.storage), bufferOf(dOut.storage)],
    outputs: [nq * 4, 3 * x.b * x.hq * x.tq * 4],
    grid: { workgroups: [Math.ceil(x.tq / ROWS), x.hq, x.b] },
  });
  const [dk, dv] = launchSpec(rt, {
    ...common,
    key: `attention_backward_dkv:${x.d}:${x.tile}`,
    source: source('attention_backward_dkv.wgsl', dkvSrc, x),
    inputs: [qb!, kb!, vb!, bb!, bufferOf(dOut.storage), stats],
    outputs: [nk * 4, nk * 4],
    grid: { workgroups: [Math.ceil(x.tk / ROWS), x.hkv, x.b] },
  });
  rt.release(stats);
  return [dq, dk, dv];
}

registerKernels<GpuBackend>('webgpu', {
  attention: (b, q, k, v, keyBias, scale, keyLength) =>
    asStorage(attention(b.runtime, q, k, v, keyBias, scale, keyLength)),
  attentionBackward: (b, q, k, v, keyBias, out, dOut, scale) => {
    const [dq, dk, dv] = attentionBackward(b.runtime, q, k, v, keyBias, out, dOut, scale);
    return [asStorage(dq), asStorage(dk), asStorage(dv)];
  },
});
