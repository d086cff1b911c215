import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import addRmsNormSrc from '../../../../shaders/add_rms_norm.wgsl';
import prelude from '../../../../shaders/prelude.wgsl';
import ropeSrc from '../../../../shaders/rope.wgsl';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import swigluSrc from '../../../../shaders/swiglu.wgsl';
import swigluBackwardSrc from '../../../../shaders/swiglu_backward.wgsl';
import tokenLogProbsSrc from '../../../../shaders/token_log_probs.wgsl';
import type { GpuRuntime } from '../runtime.js';
import { bufferOf } from '../storage.js';
import { fillTemplate, grid } from '../wgsl.js';
import { Words } from './layout.js';

/** Small fused kernels of the hot paths: RoPE, SwiGLU's gate and token log-probs, each with its backward. */
function f32Only(kernel: string, ...ts: KernelTensor[]): void {
  for (const t of ts)
    if (t.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${t.dtype}`);
}

const SECOND = [
  'if (PAIR && t < params.n0 + params.n1) {',
  '    let u = t - params.n0;',
  '    let cs = rotate(u, params.heads1);',
  '    let o = (u / params.half) * 2u * params.half + u % params.half;',
  '    let x1 = x1_in[o];',
  '    let x2 = x1_in[o + params.half];',
  '    out1[o] = x1 * cs.x - x2 * cs.y;',
  '    out1[o + params.half] = x2 * cs.x + x1 * cs.y;',
  '  }',
].join('\n');

/** RoPE of one tensor, or of two sharing their cos/sin rows (queries and keys) in one dispatch. */
export function rope(
  rt: GpuRuntime,
  xs: readonly KernelTensor[],
  cos: KernelTensor,
  sin: KernelTensor,
  inverse: boolean,
): GPUBuffer[] {
  f32Only('rope', ...xs, cos, sin);
  const outs = xs.map((x) => rt.alloc(sizeOf(x.shape) * 4));
  const half = cos.shape[cos.shape.length - 1]!;
  const pairs = xs.map((x) => sizeOf(x.shape) / 2);
  const total = pairs.reduce((a, b) => a + b, 0);
  if (total === 0) return outs;
  const pair = xs.length === 2;
  const heads = xs.map((x) => x.shape[x.shape.length - 2]!);
  const [gx, gy, gz] = grid(Math.ceil(total / 64), rt.maxWorkgroupsPerDim);
  const names = pair ? ['x0', 'x1_in', 'out0', 'out1'] : ['x0', 'out0'];
  const bindings = names.map(
    (n, k) =>
      `@group(0) @binding(${2 + k}) var<storage, ${n.startsWith('out') ? 'read_write' : 'read'}> ${n}: array<f32>;`,
  );
  bindings.push(`@group(0) @binding(${2 + names.length}) var<uniform> params: Params;`);
  rt.dispatch({
    kernel: 'rope',
    key: `rope:${pair}`,
    bindings: [
      'read',
      'read',
      ...names.map((n) => (n.startsWith('out') ? ('write' as const) : ('read' as const))),
      'uniform',
    ],
    source: () =>
      fillTemplate('rope.wgsl', ropeSrc, { PAIR: pair, BINDINGS: bindings.join('\n'), SECOND: pair ? SECOND : '' }),
    buffers: [cos, sin, ...xs].map((t) => bufferOf(t.storage)).concat(outs),
    uniforms: new Words(8)
      .u(0, pairs[0]!)
      .u(1, pairs[1] ?? 0)
      .u(2, heads[0]!)
      .u(3, heads[1] ?? 1)
      .u(4, half)
      .u(5, gx * 64)
      .f(6, inverse ? -1 : 1).u32,
    workgroups: [gx, gy, gz],
  });
  return outs;
}

export function swiglu(rt: GpuRuntime, gate: KernelTensor, up: KernelTensor): GPUBuffer {
  f32Only('swiglu', gate, up);
  const n = sizeOf(gate.shape);
  const out = rt.alloc(n * 4);
  if (n === 0) return out;
  const [gx, gy, gz] = grid(Math.ceil(n / 64), rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'swiglu',
    key: 'swiglu',
    bindings: ['read', 'read', 'write', 'uniform'],
    source: () => `${prelude}\n${swigluSrc}`,
    buffers: [bufferOf(gate.storage), bufferOf(up.storage), out],
    uniforms: new Words(4).u(0, n).u(1, gx * 64).u32,
    workgroups: [gx, gy, gz],
  });
  return out;
}

export function swigluBackward(
  rt: GpuRuntime,
  gate: KernelTensor,
  up: KernelTensor,
  dy: KernelTensor,
): [GPUBuffer, GPUBuffer] {
  f32Only('swigluBackward', gate, up, dy);
  const n = sizeOf(gate.shape);
  const outs: [GPUBuffer, GPUBuffer] = [rt.alloc(n * 4), rt.alloc(n * 4)];
  if (n === 0) return outs;
  const [gx, gy, gz] = grid(Math.ceil(n / 64), rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'swigluBackward',
    key: 'swiglu_backward',
    bindings: ['read', 'read', 'read', 'write', 'write', 'uniform'],
    source: () => `${prelude}\n${swigluBackwardSrc}`,
    buffers: [gate, up, dy].map((t) => bufferOf(t.storage)).concat(outs),
    uniforms: new Words(4).u(0, n).u(1, gx * 64).u32,
    workgroups: [gx, gy, gz],
  });
  return outs;
}

const FORWARD = {
  BINDINGS: [
    '@group(0) @binding(2) var<storage, read_write> out: array<f32>;',
    '@group(0) @binding(3) var<uniform> params: Params;',
  ].join('\n'),
  FINISH: 'if (lid == 0u) {\n    out[row] = select(f32_nan(), (sx(base + u32(max(t, 0))) - m) - log(s), valid);\n  }',
};
const BACKWARD = {
  BINDINGS: [
    '@group(0) @binding(2) var<storage, read> dy: array<f32>;',
    '@group(0) @binding(3) var<storage, read_write> dx: array<f32>;',
    '@group(0) @binding(4) var<uniform> params: Params;',
  ].join('\n'),
  FINISH: [
    'let g = dy[row] * params.scale;',
    '  for (var j = lid; j < params.v; j += WG) {',
    '    let hit = select(0.0, 1.0, valid && u32(t) == j);',
    '    dx[base + j] = g * (hit - exp(sx(base + j) - m) / s);',
    '  }',
  ].join('\n'),
};

/** Token log-probs (or, with dy, their d logits): one workgroup per row of V logits. */
export function tokenLogProbs(
  rt: GpuRuntime,
  logits: KernelTensor,
  targets: KernelTensor,
  scale: number,
  dy?: KernelTensor,
): GPUBuffer {
  const kernel = dy ? 'tokenLogProbsBackward' : 'tokenLogProbs';
  f32Only(kernel, logits, ...(dy ? [dy] : []));
  if (targets.dtype !== 'i32') throw new DTypeError(kernel, `targets must be i32, got ${targets.dtype}`);
  const rows = sizeOf(targets.shape);
  const v = logits.shape[logits.shape.length - 1]!;
  const out = rt.alloc((dy ? rows * v : rows) * 4);
  if (rows === 0) return out;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  const vars = { BACKWARD: dy !== undefined, ...(dy ? BACKWARD : FORWARD) };
  rt.dispatch({
    kernel,
    key: `token_log_probs:${dy !== undefined}`,
    bindings: dy ? ['read', 'read', 'read', 'write', 'uniform'] : ['read', 'read', 'write', 'uniform'],
    source: () => `${prelude}\n${rowReduce}\n${fillTemplate('token_log_probs.wgsl', tokenLogProbsSrc, vars)}`,
    buffers: [logits, targets, ...(dy ? [dy] : [])].map((t) => bufferOf(t.storage)).concat([out]),
    uniforms: new Words(4).u(0, rows).u(1, v).u(2, gx).f(3, scale).u32,
    workgroups: [gx, gy, gz],
  });
  return out;
}

/** [a + b, rmsNorm(a + b)] over rows of the last axis, one workgroup per row. */
export function addRmsNorm(
  rt: GpuRuntime,
  a: KernelTensor,
  b: KernelTensor,
  w: KernelTensor,
  eps: number,
): [GPUBuffer, GPUBuffer] {
  f32Only('addRmsNorm', a, b, w);
  const size = sizeOf(a.shape);
  const outs: [GPUBuffer, GPUBuffer] = [rt.alloc(size * 4), rt.alloc(size * 4)];
  const d = a.shape[a.shape.length - 1] ?? 1;
  if (size === 0) return outs;
  const rows = size / d;
  const [gx, gy, gz] = grid(rows, rt.maxWorkgroupsPerDim);
  rt.dispatch({
    kernel: 'addRmsNorm',
    key: 'add_rms_norm',
    bindings: ['read', 'read', 'read', 'write', 'write', 'uniform'],
    source: () => `${rowReduce}\n${addRmsNormSrc}`,
    buffers: [a, b, w].map((t) => bufferOf(t.storage)).concat(outs),
    uniforms: new Words(4).u(0, rows).u(1, d).f(2, eps).u(3, gx).u32,
    workgroups: [gx, gy, gz],
  });
  return outs;
}
