import type { Storage } from '../core/backend.js';
import { isFloat } from '../core/dtype.js';
import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import type { Kernels } from '../core/kernels.js';
import type { Tensor } from '../core/tensor.js';
import { kt, refuseGradient, runOpMulti } from './op.js';

export interface SampleTokensOptions {
  /** The first argmax of each row; the draws are then ignored (default false). */
  readonly greedy?: boolean;
  /** Nucleus mass in (0, 1] (default 1: no truncation). */
  readonly topP?: number;
}

export interface SampledTokens {
  /** The chosen id of each row [B] (i32). */
  readonly ids: Tensor;
  /** The log-prob of each chosen id [B] (the log-probs' dtype). */
  readonly logProbs: Tensor;
}

/**
 * One token per row of `logProbs` [B, V] (already temperature-scaled and log-softmaxed), chosen on the backend
 * where the log-probs are: greedy (the first argmax), or inverse-CDF sampling at `draws[b]` (uniform in [0, 1),
 * one per row, drawn on the host: [B], f32 or f64) over the top-p nucleus, exactly as `chooseToken`
 * (core/sampling.ts) defines it (the WebGPU kernel's f32 arithmetic and where it can differ are described in
 * shaders/sample_tokens.wgsl). Only the ids and their log-probs need reading back: 2 B numbers
 * instead of B V. Not differentiable.
 */
export function sampleTokens(logProbs: Tensor, draws: Tensor, opts: SampleTokensOptions = {}): SampledTokens {
  const op = 'sampleTokens';
  const greedy = opts.greedy ?? false;
  const topP = opts.topP ?? 1;
  if (logProbs.rank !== 2 || logProbs.shape[1]! < 1)
    throw new ShapeError(op, [logProbs.shape], 'log-probs must be [B, V] with V >= 1');
  if (draws.rank !== 1 || draws.shape[0] !== logProbs.shape[0])
    throw new ShapeError(op, [logProbs.shape, draws.shape], 'draws must be [B], one per row');
  if (!isFloat(logProbs.dtype)) throw new DTypeError(op, `log-probs must be a float dtype, got ${logProbs.dtype}`);
  if (!isFloat(draws.dtype)) throw new DTypeError(op, `draws must be a float dtype, got ${draws.dtype}`);
  if (!(topP > 0 && topP <= 1)) throw new ArgumentError(op, `topP must be in (0, 1], got ${topP}`);
  const b = logProbs.shape[0]!;
  const kernel = (k: Kernels): Storage[] => k.sampleTokens(kt(op, logProbs), kt(op, draws), greedy, topP);
  const outputs = [
    { shape: [b], dtype: 'i32' as const },
    { shape: [b], dtype: logProbs.dtype },
  ];
  const [ids, chosen] = runOpMulti(op, [logProbs, draws], outputs, kernel, refuseGradient());
  return { ids: ids!, logProbs: chosen! };
}
