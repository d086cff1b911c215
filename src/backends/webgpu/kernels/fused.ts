import type { KernelTensor } from '../../../core/backend.js';
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
import { asStorage } from '../storage.js';
import { launch } from '../launch.js';
import { cachedProgram, defineProgram, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';
import { NORM_UNIFORMS } from './norm.js';
import { rowWorkgroup } from './rows.js';

/**
 * Small fused kernels of the hot paths: RoPE, SwiGLU's gate and token log-probs (each with its backward), and a
 * residual add with the RMSNorm after it.
 */

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

/** The end of token_log_probs.wgsl's row: the forward's log-prob, or the backward's d logits. */
const FORWARD_FINISH =
  'if (lid == 0u) {\n    out[row] = select(f32_nan(), (sx(base + u32(max(t, 0))) - m) - log(s), valid);\n  }';
const BACKWARD_FINISH = [
  'let g = dy[row] * params.scale;',
  '  for (var j = lid; j < params.v; j += WG) {',
  '    let hit = select(0.0, 1.0, valid && u32(t) == j);',
  '    dx[base + j] = g * (hit - exp(sx(base + j) - m) / s);',
  '  }',
].join('\n');

const tokenLogProbsSource = (finish: string): string =>
  `${prelude}\n${rowReduce}\n${fillTemplate('token_log_probs.wgsl', tokenLogProbsSrc, { FINISH: finish })}`;
const TOKEN_LOG_PROBS_UNIFORMS = { rows: 'u32', v: 'u32', grid_x: 'u32', scale: 'f32' } as const;

const TOKEN_LOG_PROBS = (wg: number): Program =>
  cachedProgram(`tokenLogProbs:${wg}`, () => ({
    name: 'tokenLogProbs',
    inputs: { logits: 'f32', targets: 'i32' },
    outputs: { out: 'f32' },
    uniforms: TOKEN_LOG_PROBS_UNIFORMS,
    workgroupSize: wg,
    body: tokenLogProbsSource(FORWARD_FINISH),
  }));

const TOKEN_LOG_PROBS_BACKWARD = (wg: number): Program =>
  cachedProgram(`tokenLogProbsBackward:${wg}`, () => ({
    name: 'tokenLogProbsBackward',
    inputs: { logits: 'f32', targets: 'i32', dy: 'f32' },
    outputs: { dx: 'f32' },
    uniforms: TOKEN_LOG_PROBS_UNIFORMS,
    workgroupSize: wg,
    body: tokenLogProbsSource(BACKWARD_FINISH),
  }));

/** Token log-probs (or, with dy, their d logits): one workgroup per row of V logits. */
export function tokenLogProbs(
  rt: GpuRuntime,
  logits: KernelTensor,
  targets: KernelTensor,
  scale: number,
  dy?: KernelTensor,
): GPUBuffer {
  const rows = sizeOf(targets.shape);
  const v = logits.shape[logits.shape.length - 1]!;
  const programOf = dy ? TOKEN_LOG_PROBS_BACKWARD : TOKEN_LOG_PROBS;
  const call = {
    inputs: dy ? [logits, targets, dy] : [logits, targets],
    outputs: [(dy ? rows * v : rows) * 4] as const,
    grid: { workgroups: rows },
    uniforms: { rows, v, scale },
  };
  const [out] = launch(rt, programOf(rowWorkgroup(rt, programOf, call, rows, v)), call);
  return out;
}

const ADD_RMS_NORM = (wg: number): Program =>
  cachedProgram(`addRmsNorm:${wg}`, () => ({
    name: 'addRmsNorm',
    inputs: { a: 'f32', b: 'f32', w: 'f32' },
    outputs: { s: 'f32', y: 'f32' },
    uniforms: NORM_UNIFORMS,
    workgroupSize: wg,
    body: `${rowReduce}\n${addRmsNormSrc}`,
  }));

/** [a + b, rmsNorm(a + b)] over rows of the last axis, one workgroup per row. */
export function addRmsNorm(
  rt: GpuRuntime,
  a: KernelTensor,
  b: KernelTensor,
  w: KernelTensor,
  eps: number,
): [GPUBuffer, GPUBuffer] {
  const size = sizeOf(a.shape);
  const d = a.shape[a.shape.length - 1] ?? 1;
  const rows = size === 0 ? 0 : size / d;
  const call = {
    inputs: [a, b, w],
    outputs: [size * 4, size * 4] as const,
    grid: { workgroups: rows },
    uniforms: { rows, d, eps },
  };
  const [sum, y] = launch(rt, ADD_RMS_NORM(rowWorkgroup(rt, ADD_RMS_NORM, call, rows, d)), call);
  return [sum, y];
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
