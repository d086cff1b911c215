import type { KernelTensor, Storage } from '../core/backend.js';
import type { AdamWHyper, AdamWInPlace, AdamWManyHyper as KernelAdamWManyHyper, Kernels } from '../core/kernels.js';
import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { mul } from './elementwise.js';
import { kt, refuseGradient, runDonatingMulti, runOp, runOpMulti } from './op.js';

export type { AdamWHyper };

/**
 * A multi-tensor AdamW step's settings as the op takes them: the kernel's (`AdamWManyHyper`), with the schedule, if
 * any, a tensor: f32 [4] = (lr, 1 - beta1^step, 1 - beta2^step, 1 - lr wd) on the same backend, read in place of
 * `lr` and `step` (`adamwScheduleValues` in nn/optim.ts makes it), so that a recorded step reads each step's values from
 * the device; the leaves' weight decays are then 0 or that one wd.
 */
export type AdamWManyHyper = Omit<KernelAdamWManyHyper, 'schedule'> & { readonly schedule?: Tensor };

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
  const kernel = (k: Kernels): Storage[] => k.adamw(kt(op, param), kt(op, grad), kt(op, m), kt(op, v), hyper);
  const [p1, m1, v1] = runOpMulti(op, [param, grad, m, v], [like, like, like], kernel, refuseGradient());
  return { param: p1!, m: m1!, v: v1! };
}

/** sum of the squared entries of every tensor, as a scalar (one kernel, no host read). d/dx_i = 2 g x_i. */
export function sumSquares(xs: readonly Tensor[]): Tensor {
  const op = 'sumSquares';
  if (xs.length === 0) throw new ArgumentError(op, 'no tensors');
  const dtype = xs[0]!.dtype;
  for (const x of xs) if (x.dtype !== dtype) throw new DTypeError(op, `dtypes differ: ${x.dtype}, ${dtype}`);
  const kernel = (k: Kernels): Storage => k.sumSquares(xs.map((x) => kt(op, x)));
  return runOp(op, xs, [], dtype, kernel, () => (g) => xs.map((x) => mul(x, mul(g, 2))));
}

/** How an optimizer step treats the tensors it is given. */
export interface DonateOptions {
  /**
   * Give the parameters and moments away (JAX's `donate_argnums`): the step consumes them, writing the new values
   * into their storage where it is theirs alone (no view, no tape, no other argument shares it), so it allocates
   * no new weights or moments; a shared one is copied, and its other holders keep the old values. Either way the
   * given handles are disposed, and a later use throws `DonatedTensorError`. Results are bit-identical to the
   * functional step's. Default false: the inputs stay as they were.
   */
  readonly donate?: boolean;
}

/**
 * AdamW on a list of leaves in as few kernels as the backend allows (a multi-tensor step). With `maxNorm`, the
 * gradients are scaled by min(1, maxNorm / (sqrt(sumSq) + 1e-6)) first (torch.nn.utils.clip_grad_norm_), with
 * sumSq the scalar tensor from `sumSquares(grads)`, so clipping needs no host read. Not differentiable. With
 * `donate`, params, m and v are consumed and updated in place (`DonateOptions`).
 */
export function adamwUpdateMany(
  params: readonly Tensor[],
  grads: readonly Tensor[],
  m: readonly Tensor[],
  v: readonly Tensor[],
  sumSq: Tensor | null,
  hyper: AdamWManyHyper,
  opts: DonateOptions = {},
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
  const { schedule, ...numbers } = hyper;
  if (schedule) {
    if (schedule.dtype !== 'f32' || schedule.shape.length !== 1 || schedule.shape[0] !== 4)
      throw new ArgumentError(op, `the schedule must be f32 [4], got ${schedule.dtype} [${schedule.shape.join(', ')}]`);
    const decays = new Set(hyper.weightDecays.filter((wd) => wd !== 0));
    if (decays.size > 1)
      throw new ArgumentError(op, `with a schedule, one nonzero weight decay at most, got ${[...decays].join(', ')}`);
  }
  if (params.length === 0) return [];
  const read = [...grads, ...(sumSq ? [sumSq] : []), ...(schedule ? [schedule] : [])];
  const views = (ts: readonly Tensor[]): KernelTensor[] => ts.map((t) => kt(op, t));
  const kernel = (k: Kernels, inPlace?: readonly AdamWInPlace[]): Storage[] => {
    const h: KernelAdamWManyHyper = schedule ? { ...numbers, schedule: kt(op, schedule) } : numbers;
    return k.adamwMany(views(params), views(grads), views(m), views(v), sumSq && kt(op, sumSq), h, inPlace).flat();
  };
  const outs = opts.donate
    ? runDonatingMulti(
        op,
        params.flatMap((p, i) => [p, m[i]!, v[i]!]),
        read,
        (k, flags) => kernel(k, perLeaf(flags)),
        refuseGradient(),
      )
    : runOpMulti(
        op,
        [...params, ...grads, ...m, ...v, ...(sumSq ? [sumSq] : []), ...(schedule ? [schedule] : [])],
        params.flatMap((p) => [p, p, p]),
        (k) => kernel(k),
        refuseGradient(),
      );
  return params.map((_, i) => ({ param: outs[3 * i]!, m: outs[3 * i + 1]!, v: outs[3 * i + 2]! }));
}

/** The in-place flags of [p0, m0, v0, p1, ...], one record per leaf. */
const perLeaf = (flags: readonly boolean[]): AdamWInPlace[] =>
  Array.from({ length: flags.length / 3 }, (_, i) => ({
    param: flags[3 * i]!,
    m: flags[3 * i + 1]!,
    v: flags[3 * i + 2]!,
  }));
