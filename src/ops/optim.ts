import type { AdamWHyper, AdamWManyHyper, KernelTensor, Storage } from '../core/backend.js';
import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import { Tensor } from '../core/tensor.js';
import { backendOf, kt } from './op.js';

export type { AdamWHyper, AdamWManyHyper };

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

/** sum of the squared entries of every tensor, as a scalar (one kernel, no host read). */
export function sumSquares(xs: readonly Tensor[]): Tensor {
  if (xs.length === 0) throw new ArgumentError('sumSquares', 'no tensors');
  const backend = backendOf('sumSquares', xs);
  const dtype = xs[0]!.dtype;
  for (const x of xs) if (x.dtype !== dtype) throw new DTypeError('sumSquares', `dtypes differ: ${x.dtype}, ${dtype}`);
  return Tensor.fromStorage(backend, backend.sumSquares(xs.map((x) => kt('sumSquares', x))), [], xs[0]!.dtype);
}

/**
 * AdamW on a list of leaves in as few kernels as the backend allows (a multi-tensor step). With `maxNorm`, the
 * gradients are scaled by min(1, maxNorm / (sqrt(sumSq) + 1e-6)) first (torch.nn.utils.clip_grad_norm_), with
 * sumSq the scalar tensor from `sumSquares(grads)`, so clipping needs no host read. Not differentiable.
 */
export function adamwUpdateMany(
  params: readonly Tensor[],
  grads: readonly Tensor[],
  m: readonly Tensor[],
  v: readonly Tensor[],
  sumSq: Tensor | null,
  hyper: AdamWManyHyper,
): AdamWState[] {
  const op = 'adamwUpdateMany';
  const counts = [grads.length, m.length, v.length, hyper.weightDecays.length];
  if (counts.some((n) => n !== params.length)) {
    throw new ArgumentError(op, `${params.length} params, but ${counts.join(', ')} grads, m, v and decays`);
  }
  params.forEach((p, i) => {
    for (const t of [grads[i]!, m[i]!, v[i]!]) {
      if (t.shape.length !== p.shape.length || t.shape.some((d, k) => d !== p.shape[k])) {
        throw new ShapeError(op, [p.shape, t.shape], `leaf ${i}: gradient and moments must match the parameter`);
      }
    }
  });
  if (!(hyper.step >= 1)) throw new ArgumentError(op, `step must be >= 1, got ${hyper.step}`);
  if ((hyper.maxNorm === undefined) !== (sumSq === null)) throw new ArgumentError(op, 'maxNorm and sumSq go together');
  if (params.length === 0) return [];
  const backend = backendOf(op, [...params, ...grads, ...m, ...v, ...(sumSq ? [sumSq] : [])]);
  const views = (ts: readonly Tensor[]): KernelTensor[] => ts.map((t) => kt(op, t));
  const outs = backend.adamwMany(views(params), views(grads), views(m), views(v), sumSq && kt(op, sumSq), hyper);
  return outs.map((o, i) => {
    const wrap = (s: Storage): Tensor => Tensor.fromStorage(backend, s, params[i]!.shape, params[i]!.dtype);
    return { param: wrap(o[0]), m: wrap(o[1]), v: wrap(o[2]) };
  });
}
