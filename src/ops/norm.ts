import type { Backend, Storage } from '../core/backend.js';
import { DTypeError, RlvrError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { kt, refuseGradient, runOp, runOpMulti } from './op.js';

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
  if (x.dtype === 'i32' || p.dtype !== x.dtype) {
    throw new DTypeError(op, `needs float inputs of one dtype, got ${x.dtype} and ${p.dtype}`);
  }
  const d = x.shape[x.rank - 1];
  if (p.rank !== 1 || p.shape[0] !== d) throw new ShapeError(op, [x.shape, p.shape], 'parameter must be 1-D with the size of the last axis');
}

/** The backward kernels run through the door too; an outer tape that reaches them refuses rather than being wrong. */
const noSecondOrder = refuseGradient((op) => new SecondOrderError(op));

/** y = x / sqrt(mean(x^2) + eps) * weight, over the last axis (the Llama/Qwen layout). */
export function rmsNorm(x: Tensor, weight: Tensor, eps = 1e-6): Tensor {
  checkParam('rmsNorm', x, weight);
  return runOp('rmsNorm', [x, weight], x.shape, x.dtype, (b) => b.rmsNorm(kt('rmsNorm', x), kt('rmsNorm', weight), eps), () => (g) => {
    const op = 'rmsNormBackward';
    const kernel = (b: Backend): Storage[] => b.rmsNormBackward(kt(op, x), kt(op, weight), kt(op, g), eps);
    return runOpMulti(op, [x, weight, g], [x, weight], kernel, noSecondOrder);
  });
}

/** y = (x - mean) / sqrt(var + eps) * weight + bias, over the last axis, population variance. */
export function layerNorm(x: Tensor, weight: Tensor, bias: Tensor, eps = 1e-5): Tensor {
  checkParam('layerNorm', x, weight);
  checkParam('layerNorm', x, bias);
  return runOp('layerNorm', [x, weight, bias], x.shape, x.dtype, (b) => b.layerNorm(kt('layerNorm', x), kt('layerNorm', weight), kt('layerNorm', bias), eps), () => (g) => {
    const op = 'layerNormBackward';
    const kernel = (b: Backend): Storage[] => b.layerNormBackward(kt(op, x), kt(op, weight), kt(op, g), eps);
    return runOpMulti(op, [x, weight, bias, g], [x, weight, bias], kernel, noSecondOrder);
  });
}
