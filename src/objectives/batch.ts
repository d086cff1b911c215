import * as E from 'fp-ts/lib/Either.js';
import type { Backend, KernelTensor } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import type { Tensor } from '../core/tensor.js';
import { stopGradient } from '../core/transforms.js';
import { cast, clamp, greater, maximum, sub, where } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import { BatchError } from './errors.js';

/**
 * One batch of rollouts: B completions (rows) of up to T tokens, grouped by prompt.
 *
 * Tensors are per token, [B, T], float (f32, or f64 on the CPU for exact checks):
 * - `logProbs`: log pi_theta of each sampled token under the current policy. The only input differentiated.
 * - `oldLogProbs`: the same under the rollout policy pi_old. Optional: absent means on-policy, pi_old = sg(pi_theta)
 *   (TRL's behaviour with one iteration per batch). Never differentiated.
 * - `refLogProbs`: the same under the reference policy; needed only for a KL penalty (beta > 0). Never differentiated.
 * - `mask`: 1 for completion tokens, 0 for padding. L_i = sum_t mask. Entries where mask is 0 are ignored: they
 *   may hold any value (even NaN), the objectives replace them before use.
 *
 * Host-side arrays (small, numbers): `rewards` and `groupIds` (length B; equal ids form a group), optional
 * precomputed `advantages` (length B; replaces the group-normalised ones), `lengths` (completion lengths in
 * tokens, needed only by DAPO's soft overlong reward), `maxCompletionLength` (the `dr_grpo` normaliser;
 * defaults to T), `numItemsInBatch` (the `dapo` normaliser when this is a micro-batch of a larger batch: the
 * number of completion tokens in the whole batch, TRL's `num_items_in_batch`; defaults to this batch's count).
 *
 * The objectives validate what they can cheaply: `checkBatch` (shapes, host arrays, finite rewards; on a
 * synchronous backend also masks that are not 0/1 and NaN/Inf log-probs at completion tokens) runs in every
 * objective. On an asynchronous device those value checks need a readback: `validateBatch` belongs at the
 * boundary where batches enter, once per batch (the trainer also stops on a non-finite loss).
 */
export interface RolloutBatch {
  readonly logProbs: Tensor;
  readonly oldLogProbs?: Tensor;
  readonly refLogProbs?: Tensor;
  readonly mask: Tensor;
  readonly rewards: readonly number[];
  readonly groupIds: readonly number[];
  readonly advantages?: readonly number[];
  readonly lengths?: readonly number[];
  readonly maxCompletionLength?: number;
  readonly numItemsInBatch?: number;
}

const TENSORS = ['logProbs', 'oldLogProbs', 'refLogProbs', 'mask'] as const;

function checkHostArray(field: string, xs: readonly number[] | undefined, b: number, required: boolean): void {
  if (xs === undefined) {
    if (required) throw new BatchError('missing', field, 'is required');
    return;
  }
  if (xs.length !== b) throw new BatchError('shape', field, `has length ${xs.length}, the batch has ${b} rows`);
  for (let i = 0; i < xs.length; i++) {
    const v = xs[i]!;
    if (typeof v !== 'number' || !Number.isFinite(v))
      throw new BatchError('non-finite', field, `is ${v}, must be a finite number`, i);
  }
}

/**
 * Synchronous checks (no tensor data is read): shapes and dtypes of the tensors, lengths of the host arrays,
 * finite rewards, advantages, group ids and lengths. Throws a `BatchError` naming the field and index.
 */
export function checkBatch(batch: RolloutBatch): void {
  const lp = batch.logProbs;
  if (lp.rank !== 2) throw new BatchError('shape', 'logProbs', `must be [B, T], got [${lp.shape.join(', ')}]`);
  if (lp.shape[0] === 0 || lp.shape[1] === 0)
    throw new BatchError(
      'shape',
      'logProbs',
      `must have at least one row and one column, got [${lp.shape.join(', ')}]`,
    );
  if (lp.dtype === 'i32') throw new BatchError('value', 'logProbs', 'must be a float tensor (f32 or f64)');
  for (const f of TENSORS) {
    const t = batch[f];
    if (t === undefined) continue;
    if (t.rank !== 2 || t.shape[0] !== lp.shape[0] || t.shape[1] !== lp.shape[1]) {
      throw new BatchError(
        'shape',
        f,
        `must have the shape of logProbs [${lp.shape.join(', ')}], got [${t.shape.join(', ')}]`,
      );
    }
    if (t.backend !== lp.backend)
      throw new BatchError('value', f, `lives on backend ${t.backend.name}, logProbs on ${lp.backend.name}`);
  }
  const b = lp.shape[0]!;
  checkHostArray('rewards', batch.rewards, b, true);
  checkHostArray('groupIds', batch.groupIds, b, true);
  checkHostArray('advantages', batch.advantages, b, false);
  checkHostArray('lengths', batch.lengths, b, false);
  batch.lengths?.forEach((l, i) => {
    if (!Number.isInteger(l) || l < 0)
      throw new BatchError('value', 'lengths', `is ${l}, must be a nonnegative integer`, i);
  });
  for (const f of ['maxCompletionLength', 'numItemsInBatch'] as const) {
    const v = batch[f];
    if (v !== undefined && !(Number.isFinite(v) && v > 0))
      throw new BatchError('value', f, `is ${v}, must be a positive number`);
  }
  if (lp.backend.synchronous) checkValues(batch, lp.backend.readSync.bind(lp.backend));
}

/**
 * The value checks of `validateBatch` (mask 0/1; finite log-probs at completion tokens) over host arrays. On a
 * synchronous backend `checkBatch` runs them too (one pass over [B, T], cheap beside any objective), so the
 * objectives reject such a batch themselves there; on an asynchronous device, call `validateBatch`.
 */
function checkValues(batch: RolloutBatch, read: (t: KernelTensor) => ArrayLike<number>): void {
  const kernelView = (t: Tensor): KernelTensor => ({
    storage: t.storageFor('checkBatch'),
    shape: t.shape,
    dtype: t.dtype,
  });
  const mask = read(kernelView(batch.mask));
  const err = valueError(batch, mask, (f) => read(kernelView(batch[f]!)));
  if (err) throw err;
}

type LogProbField = 'logProbs' | 'oldLogProbs' | 'refLogProbs';

function valueError(
  batch: RolloutBatch,
  mask: ArrayLike<number>,
  values: (f: LogProbField) => ArrayLike<number>,
): BatchError | null {
  for (let i = 0; i < mask.length; i++) {
    const v = mask[i]!;
    if (v !== 0 && v !== 1) {
      return new BatchError(Number.isFinite(v) ? 'value' : 'non-finite', 'mask', `is ${v}, must be 0 or 1`, i);
    }
  }
  for (const f of ['logProbs', 'oldLogProbs', 'refLogProbs'] as const) {
    if (batch[f] === undefined) continue;
    const xs = values(f);
    for (let i = 0; i < xs.length; i++) {
      if (mask[i] === 1 && !Number.isFinite(xs[i]!)) {
        return new BatchError('non-finite', f, `is ${xs[i]} at a completion token`, i);
      }
    }
  }
  return null;
}

/** `checkBatch` as an fp-ts `Either`. */
export function parseBatch(batch: RolloutBatch): E.Either<BatchError, RolloutBatch> {
  try {
    checkBatch(batch);
    return E.right(batch);
  } catch (e) {
    if (e instanceof BatchError) return E.left(e);
    throw e;
  }
}

/**
 * Full validation at the boundary: `checkBatch`, then reads the tensors back (works on every backend) and
 * rejects a mask entry other than 0/1 and a NaN or infinite log-prob (current, old or reference) at a completion
 * token (mask 1). Padding positions are not checked: the objectives never read them.
 */
export async function validateBatch(batch: RolloutBatch): Promise<E.Either<BatchError, RolloutBatch>> {
  const sync = parseBatch(batch);
  if (E.isLeft(sync)) return sync;
  const mask = await batch.mask.data();
  const read: Partial<Record<string, ArrayLike<number>>> = {};
  for (const f of ['logProbs', 'oldLogProbs', 'refLogProbs'] as const) if (batch[f]) read[f] = await batch[f].data();
  const err = valueError(batch, mask, (f) => read[f]!);
  return err ? E.left(err) : E.right(batch);
}

/**
 * The bound on a log-ratio before it is exponentiated. Every ratio exp(l - l_old), and k3's exp(l_ref - l), is
 * computed from the log-ratio clamped to [-20, 20], the bound verl's own losses clamp to (core_algos.py): with
 * finite inputs the ratio stays below e^20 = 4.9e8, so a ratio times an advantage stays finite in f32 where
 * exp(100) would be Infinity. Past the bound a token's ratio is constant: no gradient flows through it (the
 * bound itself passes it, as every clamp here does). python/rlvr_objectives states the same bound.
 */
export const LOG_RATIO_BOUND = 20;

/** @internal clamp(a - b, -LOG_RATIO_BOUND, LOG_RATIO_BOUND): the log-ratio an objective exponentiates. */
export const boundedLogRatio = (a: Tensor, b: Tensor): Tensor => clamp(sub(a, b), -LOG_RATIO_BOUND, LOG_RATIO_BOUND);

/** @internal The batch's tensors made safe to compute with: padding replaced by 0, old/ref detached. */
export interface Prepared {
  readonly b: number;
  readonly t: number;
  readonly dtype: DType;
  readonly backend: Backend;
  /** Completion mask in the log-probs' dtype, [B, T]. */
  readonly mask: Tensor;
  /** log pi_theta with padding set to 0, [B, T] (differentiable). */
  readonly logp: Tensor;
  /** log pi_old with padding set to 0, [B, T] (detached). */
  readonly old: Tensor;
  /** log pi_ref with padding set to 0, [B, T] (detached), when given. */
  readonly ref: Tensor | undefined;
  /** L_i, [B]. */
  readonly lengths: Tensor;
  /** max(1, L_i), [B, 1]: the length normaliser that keeps zero-length completions finite. */
  readonly safeLengths: Tensor;
}

/** @internal */
export function prepare(batch: RolloutBatch): Prepared {
  checkBatch(batch);
  const lp = batch.logProbs;
  const mask = cast(batch.mask, lp.dtype);
  const on = greater(mask, 0);
  const clean = (x: Tensor): Tensor => where(on, x, 0);
  const lengths = sum(mask, 1);
  return {
    b: lp.shape[0]!,
    t: lp.shape[1]!,
    dtype: lp.dtype,
    backend: lp.backend,
    mask,
    logp: clean(lp),
    old: clean(stopGradient(batch.oldLogProbs ?? lp)),
    ref: batch.refLogProbs && clean(stopGradient(batch.refLogProbs)),
    lengths,
    safeLengths: maximum(sum(mask, 1, true), 1),
  };
}
