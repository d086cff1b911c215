import type { KernelTensor } from '../../../core/backend.js';
import { DTypeError } from '../../../core/errors.js';
import { registerKernels } from '../../../core/kernels.js';
import { sizeOf } from '../../../core/shape.js';
import addRmsNormSrc from '../../../../shaders/add_rms_norm.wgsl';
import prelude from '../../../../shaders/prelude.wgsl';
import ropeSrc from '../../../../shaders/rope.wgsl';
import rowReduce from '../../../../shaders/row_reduce.wgsl';
import swigluSrc from '../../../../shaders/swiglu.wgsl';
import swigluBackwardSrc from '../../../../shaders/swiglu_backward.wgsl';
import tokenLogProbsSrc from '../../../../shaders/token_log_probs.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { launch, launchSpec } from '../launch.js';
import { cachedProgram, defineProgram, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';
import { Words } from './layout.js';

/** Small fused kernels of the hot paths: RoPE, SwiGLU's gate and token log-probs, each with its backward. */
function f32Only(kernel: string, ...ts: KernelTensor[]): void {
  for (const t of ts)
    if (t.dtype !== 'f32') throw new DTypeError(kernel, `the WebGPU kernel needs f32, got ${t.dtype}`);
}

/** The rotation of the second tensor (queries and keys in one dispatch), spliced into rope.wgsl's `{{SECOND}}`. */
const SECOND = [
  'if (t < params.n0 + params.n1) {',
  '    let u = t - params.n0;',
  '    let cs = rotate(u, params.heads1);',
  '    let o = (u / params.half) * 2u * params.half + u % params.half;',
  '    let x1 = x1_in[o];',
  '    let x2 = x1_in[o + params.half];',
  '    out1[o] = x1 * cs.x - x2 * cs.y;',
  '    out1[o + params.half] = x2 * cs.x + x1 * cs.y;',
  '  }',
].join('\n');

/** RoPE of one tensor (x0 into out0), or of two sharing their cos/sin rows (x1_in into out1 too). */
const ropeProgram = (pair: boolean): Program =>
  cachedProgram(`rope:${pair}`, () => ({
    name: 'rope',
    inputs: { cos_t: 'f32', sin_t: 'f32', x0: 'f32', ...(pair ? { x1_in: 'f32' as const } : {}) },
    outputs: { out0: 'f32', ...(pair ? { out1: 'f32' as const } : {}) },
    uniforms: { n0: 'u32', n1: 'u32', heads0: 'u32', heads1: 'u32', half: 'u32', grid_x: 'u32', sign: 'f32' },
    workgroupSize: 64,
    body: fillTemplate('rope.wgsl', ropeSrc, { SECOND: pair ? SECOND : '' }),
  }));

/** RoPE of one tensor, or of two sharing their cos/sin rows (queries and keys) in one dispatch. */
export function rope(
  rt: GpuRuntime,
  xs: readonly KernelTensor[],
  cos: KernelTensor,
  sin: KernelTensor,
  inverse: boolean,
): GPUBuffer[] {
  const half = cos.shape[cos.shape.length - 1]!;
  const pairs = xs.map((x) => sizeOf(x.shape) / 2);
  const heads = xs.map((x) => x.shape[x.shape.length - 2]!);
  return launch(rt, ropeProgram(xs.length === 2), {
    inputs: [cos, sin, ...xs],
    outputs: xs.map((x) => sizeOf(x.shape) * 4),
    grid: { threads: pairs.reduce((a, b) => a + b, 0) },
    uniforms: {
      n0: pairs[0]!,
      n1: pairs[1] ?? 0,
      heads0: heads[0]!,
      heads1: heads[1] ?? 1,
      half,
      sign: inverse ? -1 : 1,
    },
  });
}

const SWIGLU = defineProgram({
  name: 'swiglu',
  inputs: { gate: 'f32', up: 'f32' },
  outputs: { out: 'f32' },
  uniforms: { n: 'u32', grid_x: 'u32' },
  workgroupSize: 64,
  body: `${prelude}\n${swigluSrc}`,
});

export function swiglu(rt: GpuRuntime, gate: KernelTensor, up: KernelTensor): GPUBuffer {
  const n = sizeOf(gate.shape);
  const [out] = launch(rt, SWIGLU, { inputs: [gate, up], outputs: [n * 4], grid: { threads: n }, uniforms: { n } });
  return out;
}

const SWIGLU_BACKWARD = defineProgram({
  name: 'swigluBackward',
  inputs: { gate: 'f32', up: 'f32', dy: 'f32' },
  outputs: { d_gate: 'f32', d_up: 'f32' },
  uniforms: { n: 'u32', grid_x: 'u32' },
  workgroupSize: 64,
  body: `${prelude}\n${swigluBackwardSrc}`,
});

export function swigluBackward(
  rt: GpuRuntime,
  gate: KernelTensor,
  up: KernelTensor,
  dy: KernelTensor,
): [GPUBuffer, GPUBuffer] {
  const n = sizeOf(gate.shape);
  return launch(rt, SWIGLU_BACKWARD, {
    inputs: [gate, up, dy],
    outputs: [n * 4, n * 4],
    grid: { threads: n },
    uniforms: { n },
  });
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
  const vars = { BACKWARD: dy !== undefined, ...(dy ? BACKWARD : FORWARD) };
  // One workgroup per row.
  const [out] = launchSpec(rt, {
    kernel,
    key: `token_log_probs:${dy !== undefined}`,
    source: () => `${prelude}\n${rowReduce}\n${fillTemplate('token_log_probs.wgsl', tokenLogProbsSrc, vars)}`,
    inputs: [logits, targets, ...(dy ? [dy] : [])].map((t) => bufferOf(t.storage)),
    outputs: [(dy ? rows * v : rows) * 4],
    grid: { threads: rows, workgroupSize: 1 },
    uniforms: ([gx]) => new Words(4).u(0, rows).u(1, v).u(2, gx).f(3, scale).u32,
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
  const d = a.shape[a.shape.length - 1] ?? 1;
  const rows = size === 0 ? 0 : size / d;
  // One workgroup per row.
  return launchSpec(rt, {
    kernel: 'addRmsNorm',
    key: 'add_rms_norm',
    source: () => `${rowReduce}\n${addRmsNormSrc}`,
    inputs: [a, b, w].map((t) => bufferOf(t.storage)),
    outputs: [size * 4, size * 4],
    grid: { threads: rows, workgroupSize: 1 },
    uniforms: ([gx]) => new Words(4).u(0, rows).u(1, d).f(2, eps).u(3, gx).u32,
  });
}

registerKernels<GpuBackend>('webgpu', {
  rope: (b, xs, cos, sin, inverse) => rope(b.runtime, xs, cos, sin, inverse).map(asStorage),
  addRmsNorm: (b, x, delta, weight, eps) => {
    const [sum, y] = addRmsNorm(b.runtime, x, delta, weight, eps);
    return [asStorage(sum), asStorage(y)];
  },
  swiglu: (b, gate, up) => asStorage(swiglu(b.runtime, gate, up)),
  swigluBackward: (b, gate, up, dy) => {
    const [dGate, dUp] = swigluBackward(b.runtime, gate, up, dy);
    return [asStorage(dGate), asStorage(dUp)];
  },
  tokenLogProbs: (b, logits, targets, scale) => asStorage(tokenLogProbs(b.runtime, logits, targets, scale)),
  tokenLogProbsBackward: (b, logits, targets, dy, scale) =>
    asStorage(tokenLogProbs(b.runtime, logits, targets, scale, dy)),
});
