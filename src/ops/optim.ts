import type { AdamWHyper } from '../core/backend.js';
import { ArgumentError, ShapeError } from '../core/errors.js';
import { Tensor } from '../core/tensor.js';
import { backendOf, kt } from './op.js';

export type { AdamWHyper };

export interface AdamWState {
  readonly param: Tensor;
  readonly m: Tensor;
  readonly v: Tensor;
}

/**
 * One fused AdamW step on one parameter tensor (a single kernel on every backend). Functional: returns new
 * tensors and leaves the inputs as they were. Not differentiable (an optimizer step is outside any tape).
 */
export function adamwUpdate(param: Tensor, grad: Tensor, m: Tensor, v: Tensor, hyper: AdamWHyper): AdamWState {
  for (const t of [grad, m, v]) {
    if (t.shape.length !== param.shape.length || t.shape.some((d, i) => d !== param.shape[i])) {
      throw new ShapeError('adamwUpdate', [param.shape, t.shape], 'gradient and moments must match the parameter');
    }
  }
  if (!(hyper.step >= 1)) throw new ArgumentError('adamwUpdate', `step must be >= 1, got ${hyper.step}`);
  const backend = backendOf('adamwUpdate', [param, grad, m, v]);
  const [p1, m1, v1] = backend.adamw(kt('adamw', param), kt('adamw', grad), kt('adamw', m), kt('adamw', v), hyper);
  const wrap = (s: typeof p1): Tensor => Tensor.fromStorage(backend, s, param.shape, param.dtype);
  return { param: wrap(p1), m: wrap(m1), v: wrap(v1) };
}
