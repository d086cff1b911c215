import { RlvrError, ShapeError } from '../core/errors.js';
import { shapesEqual } from '../core/shape.js';
import { recordOp } from '../core/tape.js';
import { Tensor } from '../core/tensor.js';
import { backendOf, kt, runOp } from './op.js';
import type { Backend, Storage } from '../core/backend.js';

/**
 * RMSNorm and LayerNorm over the last axis, each a fused forward kernel and a fused backward kernel.
 * The backward kernels are not themselves differentiated: taking a second derivative through a norm throws.
 */
export class SecondOrderError extends RlvrError {
  constructor(readonly op: string) {
    super(`${op}: second-order gradients through this fused backward kernel are not implemented`);
  }
}

function checkParam(op: string, x: Tensor, p: Tensor): void {
  const d = x.shape[x.rank - 1];
  if (p.rank !== 1 || p.shape[0] !== d) throw new ShapeError(op, [x.shape, p.shape], 'parameter must be 1-D with the size of the last axis');
}

/** Wrap backward-kernel outputs; if an outer tape watches them, its vjp refuses rather than being silently wrong. */
export function wrapBackward(
  op: string,
  inputs: readonly Tensor[],
  outs: readonly { storage: Storage; like: Tensor }[],
): Tensor[] {
  const backend = backendOf(op, inputs);
  return outs.map(({ storage, like }) => {
    const t = Tensor.fromStorage(backend, storage, like.shape, like.dtype);
    recordOp(op, inputs, t, () => {
      throw new SecondOrderError(op);
    });
    return t;
  });
}

/** y = x / sqrt(mean(x^2) + eps) * weight, over the last axis (the Llama/Qwen layout). */
export function rmsNorm(x: Tensor, weight: Tensor, eps = 1e-6): Tensor {
  checkParam('rmsNorm', x, weight);
  const kernel = (b: Backend): Storage => b.rmsNorm(kt('rmsNorm', x), kt('rmsNorm', weight), eps);
  return runOp('rmsNorm', [x, weight], x.shape, x.dtype, kernel, () => rmsNormRule(x, weight, eps));
}

const rmsNormRule = (x: Tensor, weight: Tensor, eps: number) => (g: Tensor): Tensor[] => {
  const [dx, dw] = x.backend.rmsNormBackward(kt('rmsNorm', x), kt('rmsNorm', weight), kt('rmsNorm', g), eps);
  return wrapBackward('rmsNormBackward', [x, weight, g], [
    { storage: dx, like: x },
    { storage: dw, like: weight },
  ]);
};

/**
 * A residual add followed by the next pre-norm, { sum: x + delta, normed: rmsNorm(x + delta) }, in one kernel.
 * The tape sees the two ops it replaces (an add, then an RMSNorm of its result), so gradients are unchanged.
 */
export function addRmsNorm(x: Tensor, delta: Tensor, weight: Tensor, eps = 1e-6): { sum: Tensor; normed: Tensor } {
  checkParam('addRmsNorm', x, weight);
  if (!shapesEqual(x.shape, delta.shape)) {
    throw new ShapeError('addRmsNorm', [x.shape, delta.shape], 'x and delta must have the same shape');
  }
  let normed: Storage | null = null;
  // One kernel writes both outputs; each goes through runOp with its own rule (the second kernel is a no-op).
  const sum = runOp('add', [x, delta], x.shape, x.dtype, (b) => {
    const [s, y] = b.addRmsNorm(kt('addRmsNorm', x), kt('addRmsNorm', delta), kt('addRmsNorm', weight), eps);
    normed = y;
    return s;
  }, () => (g, needs) => [needs[0] ? g : null, needs[1] ? g : null]);
  const y = runOp('rmsNorm', [sum, weight], x.shape, x.dtype, () => normed!, () => rmsNormRule(sum, weight, eps));
  return { sum, normed: y };
}

/** y = (x - mean) / sqrt(var + eps) * weight + bias, over the last axis, population variance. */
export function layerNorm(x: Tensor, weight: Tensor, bias: Tensor, eps = 1e-5): Tensor {
  checkParam('layerNorm', x, weight);
  checkParam('layerNorm', x, bias);
  return runOp('layerNorm', [x, weight, bias], x.shape, x.dtype, (b) => b.layerNorm(kt('layerNorm', x), kt('layerNorm', weight), kt('layerNorm', bias), eps), () => (g) => {
    const [dx, dw, db] = x.backend.layerNormBackward(kt('layerNorm', x), kt('layerNorm', weight), kt('layerNorm', g), eps);
    return wrapBackward('layerNormBackward', [x, weight, bias, g], [
      { storage: dx, like: x },
      { storage: dw, like: weight },
      { storage: db, like: bias },
    ]);
  });
}
