import type { Storage } from '../core/backend.js';
import type { Kernels } from '../core/kernels.js';
import { DTypeError, ShapeError } from '../core/errors.js';
import { shapesEqual } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { kt, runBackward, runOp } from './op.js';
import { absorbed, trackedByActiveTape } from '../core/tape.js';

/**
 * RMSNorm and LayerNorm over the last axis, each a fused forward kernel and a fused backward kernel.
 * The backward kernels are not themselves differentiated: taking a second derivative through a norm throws
 * `SecondOrderError`.
 */
export { SecondOrderError } from '../core/errors.js';

function checkParam(op: string, x: Tensor, p: Tensor): void {
  if (x.dtype === 'i32' || p.dtype !== x.dtype) {
    throw new DTypeError(op, `needs float inputs of one dtype, got ${x.dtype} and ${p.dtype}`);
  }
  const d = x.shape[x.rank - 1];
  if (p.rank !== 1 || p.shape[0] !== d)
    throw new ShapeError(op, [x.shape, p.shape], 'parameter must be 1-D with the size of the last axis');
}

/**
 * [dx, dweight] of rmsNorm(x, weight) for the cotangent g: one fused kernel. Given the cotangent x has gathered
 * so far (`prior`, of x's dtype), dx comes out as prior + the norm's dx, `absorbed`: the tape's add is folded in.
 * Not when an outer tape tracks the prior: this kernel has no rule of its own, and the add it replaces has one.
 */
function rmsNormGrads(x: Tensor, weight: Tensor, g: Tensor, eps: number, prior: Tensor | null): Tensor[] {
  const op = 'rmsNormBackward';
  const p = prior?.dtype === x.dtype && !trackedByActiveTape(prior) ? prior : null;
  const kernel = (k: Kernels): Storage[] =>
    k.rmsNormBackward(kt(op, x), kt(op, weight), kt(op, g), eps, p && kt(op, p));
  const [dx, dw] = runBackward(op, p ? [x, weight, g, p] : [x, weight, g], [x, weight], kernel);
  return [p ? absorbed(dx!) : dx!, dw!];
}

/** y = x / sqrt(mean(x^2) + eps) * weight, over the last axis (the Llama/Qwen layout). */
export function rmsNorm(x: Tensor, weight: Tensor, eps = 1e-6): Tensor {
  checkParam('rmsNorm', x, weight);
  const kernel = (k: Kernels): Storage => k.rmsNorm(kt('rmsNorm', x), kt('rmsNorm', weight), eps);
  return runOp(
    'rmsNorm',
    [x, weight],
    x.shape,
    x.dtype,
    kernel,
    () => (g, _needs, prior) => rmsNormGrads(x, weight, g, eps, prior[0] ?? null),
  );
}

/**
 * A residual add followed by the next pre-norm, { sum: x + delta, normed: rmsNorm(x + delta) }, in one kernel.
 * The tape sees the two ops it replaces (an add, then an RMSNorm of its result): the norm's cotangent reaches the
 * sum, joins the sum's own there, and flows on to x and delta once (one accumulation, not one per input).
 */
export function addRmsNorm(x: Tensor, delta: Tensor, weight: Tensor, eps = 1e-6): { sum: Tensor; normed: Tensor } {
  const op = 'addRmsNorm';
  checkParam(op, x, weight);
  if (!shapesEqual(x.shape, delta.shape))
    throw new ShapeError(op, [x.shape, delta.shape], 'x and delta must have the same shape');
  let normed: Storage | null = null;
  // One kernel writes both outputs; the second door call adopts the output the first kernel already wrote.
  const kernel = (k: Kernels): Storage => {
    const [s, y] = k.addRmsNorm(kt(op, x), kt(op, delta), kt(op, weight), eps);
    normed = y!;
    return s!;
  };
  const sum = runOp(op, [x, delta], x.shape, x.dtype, kernel, () => (g) => [g, g]);
  const y = runOp(
    'rmsNorm',
    [sum, weight],
    x.shape,
    x.dtype,
    () => normed!,
    () => (g, _needs, prior) => rmsNormGrads(sum, weight, g, eps, prior[0] ?? null),
  );
  return { sum, normed: y };
}

/** y = (x - mean) / sqrt(var + eps) * weight + bias, over the last axis, population variance. */
export function layerNorm(x: Tensor, weight: Tensor, bias: Tensor, eps = 1e-5): Tensor {
  checkParam('layerNorm', x, weight);
  checkParam('layerNorm', x, bias);
  const kernel = (k: Kernels): Storage =>
    k.layerNorm(kt('layerNorm', x), kt('layerNorm', weight), kt('layerNorm', bias), eps);
  return runOp('layerNorm', [x, weight, bias], x.shape, x.dtype, kernel, () => (g) => {
    const op = 'layerNormBackward';
    const grads = (k: Kernels): Storage[] => k.layerNormBackward(kt(op, x), kt(op, weight), kt(op, g), eps);
    return runBackward(op, [x, weight, bias, g], [x, weight, bias], grads);
  });
}
