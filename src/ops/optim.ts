import type { AdamWHyper, Backend, Storage } from '../core/backend.js';
import { ArgumentError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { kt, refuseGradient, runOpMulti } from './op.js';

export type { AdamWHyper };

export interface AdamWState {
  readonly param: Tensor;
  readonly m: Tensor;
  readonly v: Tensor;
}

/**
 * One fused AdamW step on one parameter tensor (a single kernel on every backend). Functional: returns new
 * tensors and leaves the inputs as they were. Not differentiable: a tape that reaches it throws
 * `NotDifferentiableError` (an optimizer step belongs outside the transformed function).
 */
export function adamwUpdate(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hyper: AdamWHyper): AdamWState {
  for (const t of [grad, m, v]) {
    if (t.shape.length !== param.shape.length || t.shape.some((d, i) => d !== param.shape[i])) {
      throw new ShapeError('adamwUpdate', [param.shape, t.shape], 'gradient and moments must match the parameter');
    }
  }
  if (!(hyper.step >= 1)) throw new ArgumentError('adamwUpdate', `step must be >= 1, got ${hyper.step}`);
  const op = 'adamwUpdate';
  const like = { shape: param.shape, dtype: param.dtype };
  const kernel = (b: Backend): Storage[] => b.adamw(kt(op, param), kt(op, grad), kt(op, m), kt(op, v), hyper);
  const [p1, m1, v1] = runOpMulti(op, [param, grad, m, v], [like, like, like], kernel, refuseGradient());
  return { param: p1!, m: m1!, v: v1! };
}
