import { ArgumentError } from '../core/errors.js';
import { adamwStepValues } from '../core/kernels.js';
import { treeLeaves, treeMap, type PyTree } from '../core/pytree.js';
import type { Tensor } from '../core/tensor.js';
import { zerosLike } from '../ops/creation.js';
import { sqrt } from '../ops/elementwise.js';
import { adamwUpdateMany, sumSquares, type DonateOptions } from '../ops/optim.js';
import { lrAt, type LrSchedule } from './schedule.js';

/**
 * AdamW over a parameter pytree (PyTorch's AdamW: decoupled weight decay, bias-corrected moments), with global
 * gradient-norm clipping and an optional warmup/cosine schedule. Functional: a step returns new parameters and
 * a new state; the caller disposes the old ones (on WebGPU each is a live buffer). A caller that no longer needs
 * them gives them away instead (`{ donate: true }`, as JAX's donated buffers): the step writes into their storage,
 * so it costs no second copy of the weights and moments, with the same results. The state is a pytree of tensors
 * plus a step count, so it goes into a checkpoint as it is.
 */
export interface AdamWConfig {
  /** The learning rate when there is no schedule. */
  readonly lr: number;
  readonly beta1?: number;
  readonly beta2?: number;
  readonly eps?: number;
  readonly weightDecay?: number;
  /** Clip the global L2 norm of the gradients to this (torch.nn.utils.clip_grad_norm_); none if absent. */
  readonly maxGradNorm?: number;
  /** If given, the learning rate of step s is lrAt(schedule, s) and `lr` is ignored. */
  readonly schedule?: LrSchedule;
  /**
   * Which leaves get weight decay (by leaf, in treeLeaves order). Default: matrices only (rank >= 2), so norm
   * weights are not decayed, as Hugging Face's trainer excludes LayerNorm weights and biases.
   */
  readonly decay?: (leaf: Tensor, index: number) => boolean;
}

export type OptimizerState<P> = {
  /** Optimizer steps taken so far. */
  readonly step: number;
  readonly m: P;
  readonly v: P;
};

export function adamwInit<P extends PyTree>(params: P): OptimizerState<P> {
  return { step: 0, m: treeMap(params, (p) => zerosLike(p)), v: treeMap(params, (p) => zerosLike(p)) };
}

/** sqrt(sum of squares of every leaf), as a scalar tensor (no host read). */
export function globalNorm(tree: PyTree): Tensor {
  const leaves = treeLeaves(tree);
  if (leaves.length === 0) throw new ArgumentError('globalNorm', 'the tree has no tensors');
  return sqrt(sumSquares(leaves));
}

/** The settings of the step after `stepsTaken` steps, defaults filled in. */
function stepSettings(stepsTaken: number, cfg: AdamWConfig) {
  return {
    beta1: cfg.beta1 ?? 0.9,
    beta2: cfg.beta2 ?? 0.999,
    eps: cfg.eps ?? 1e-8,
    weightDecay: cfg.weightDecay ?? 0.01,
    lr: cfg.schedule ? lrAt(cfg.schedule, stepsTaken) : cfg.lr,
    step: stepsTaken + 1,
  };
}

/**
 * The values of the step after `stepsTaken` steps as `adamwStep`'s `schedule` tensor holds them: f32 (lr, 1 -
 * beta1^step, 1 - beta2^step, 1 - lr wd), each computed in f64 and rounded once, as the kernels' uniforms are. A
 * recorded step (`recordStep`) takes this as an input each step: its AdamW then reads the step's values from the
 * device instead of freezing those of the step it was recorded at.
 */
export function adamwScheduleValues(stepsTaken: number, cfg: AdamWConfig): Float32Array {
  const settings = stepSettings(stepsTaken, cfg);
  const { lr, c1, c2, decay } = adamwStepValues(settings, null, settings.weightDecay);
  return Float32Array.of(lr, c1, c2, decay);
}

/** `adamwStep`'s options: donation, and the step's values as a device tensor. */
export interface AdamWStepOptions extends DonateOptions {
  /**
   * `adamwScheduleValues` as an f32 [4] tensor on the parameters' backend: the kernel reads lr and the bias
   * corrections from it instead of computing them from `state.step` (which then only counts, and `lr` in the result
   * is the host's figure for that count).
   */
  readonly schedule?: Tensor;
}

/** A type alias (not an interface) so that it is a pytree: `tidy(() => adamwStep(...))` keeps its tensors. */
export type AdamWStepResult<P> = {
  readonly params: P;
  readonly state: OptimizerState<P>;
  /** The global gradient norm before clipping (a scalar tensor: read it only when logging). */
  readonly gradNorm: Tensor;
  readonly lr: number;
};

/**
 * One AdamW step over every leaf as a multi-tensor kernel (a few dispatches, not one per leaf). Clipping stays on
 * the device: the kernel scales the gradients by min(1, maxNorm / (norm + 1e-6)) from the sum of squares, so no
 * value is read back to the host. With `{ donate: true }` the step consumes `params` and `state`'s moments and
 * updates them in place (`DonateOptions`): every tensor of theirs is disposed, and a later use throws
 * `DonatedTensorError` naming the step.
 */
export function adamwStep<P extends PyTree>(
  params: P,
  grads: P,
  state: OptimizerState<P>,
  cfg: AdamWConfig,
  opts: AdamWStepOptions = {},
): AdamWStepResult<P> {
  const { beta1, beta2, eps, weightDecay, lr, step } = stepSettings(state.step, cfg);
  const decay = cfg.decay ?? ((leaf: Tensor) => leaf.rank >= 2);
  const gs = treeLeaves(grads);
  if (gs.length === 0) throw new ArgumentError('adamwStep', 'the gradient tree has no tensors');
  const sumSq = sumSquares(gs);
  const gradNorm = sqrt(sumSq);
  const leaves = treeLeaves(params);
  const weightDecays = leaves.map((p, i) => (decay(p, i) ? weightDecay : 0));
  const clip = cfg.maxGradNorm !== undefined;
  const hyper = {
    lr,
    beta1,
    beta2,
    eps,
    step,
    weightDecays,
    ...(clip ? { maxNorm: cfg.maxGradNorm } : {}),
    ...(opts.schedule ? { schedule: opts.schedule } : {}),
  };
  const [m, v] = [treeLeaves(state.m), treeLeaves(state.v)];
  const updated = adamwUpdateMany(leaves, gs, m, v, clip ? sumSq : null, hyper, opts);
  return {
    params: treeMap(params, (_, i) => updated[i]!.param),
    state: { step, m: treeMap(state.m, (_, i) => updated[i]!.m), v: treeMap(state.v, (_, i) => updated[i]!.v) },
    gradNorm,
    lr,
  };
}
