import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import type { Storage } from '../core/backend.js';
import type { Kernels } from '../core/kernels.js';
import { mul, neg, sub } from './elementwise.js';
import { checkIndices, takeAlongAxis } from './indexing.js';
import { expandDims, squeeze } from './movement.js';
import { kt, runOp } from './op.js';
import { mean, sum } from './reduce.js';
import { softmax } from './softmax.js';

export type Reduction = 'mean' | 'sum' | 'none';

/**
 * Cross-entropy of integer targets under logits along the last axis: -log softmax(logits)[target].
 * logits [..., V], targets [...] (i32). Reduction as in PyTorch (default mean).
 */
export function crossEntropy(logits: Tensor, targets: Tensor, reduction: Reduction = 'mean'): Tensor {
  if (targets.dtype !== 'i32') throw new DTypeError('crossEntropy', `targets must be i32, got ${targets.dtype}`);
  if (targets.rank !== logits.rank - 1 || targets.shape.some((d, i) => d !== logits.shape[i])) {
    throw new ShapeError(
      'crossEntropy',
      [logits.shape, targets.shape],
      'targets must have the logits shape without the last axis',
    );
  }
  const losses = neg(tokenLogProbs(logits, targets));
  return reduction === 'none' ? losses : reduction === 'sum' ? sum(losses) : mean(losses);
}

/**
 * Log-probability of each target token: logSoftmax(scale * logits)[..., target], logits [..., V], targets [...]
 * -> [...], in one fused kernel (the [..., V] log-softmax is never stored; the backward writes d logits once).
 * `scale` is 1 / temperature. Targets lie in [0, V), checked as `gather` checks its indices (`IndexRangeError`).
 */
export function tokenLogProbs(logits: Tensor, targets: Tensor, scale = 1): Tensor {
  const op = 'tokenLogProbs';
  if (targets.dtype !== 'i32') throw new DTypeError(op, `targets must be i32, got ${targets.dtype}`);
  if (logits.rank < 1 || targets.rank !== logits.rank - 1 || targets.shape.some((d, i) => d !== logits.shape[i])) {
    throw new ShapeError(op, [logits.shape, targets.shape], 'targets must have the logits shape without the last axis');
  }
  if (!Number.isFinite(scale)) throw new ArgumentError(op, `scale must be finite, got ${scale}`);
  checkIndices(op, targets, logits.shape[logits.rank - 1]!);
  const kernel = (k: Kernels): Storage => k.tokenLogProbs(kt(op, logits), kt(op, targets), scale);
  const rule = () => (g: Tensor) => [tokenLogProbsGrad(logits, targets, g, scale), null];
  return runOp(op, [logits, targets], targets.shape, logits.dtype, kernel, rule);
}

/**
 * d logits = g scale (onehot(target) - p), p = softmax(scale logits), in one kernel. Its own rule (for second
 * derivatives) is written in ops: d logits' = -g scale^2 p (c - sum(c p)), d g = scale (c[target] - sum(c p)).
 */
function tokenLogProbsGrad(logits: Tensor, targets: Tensor, g: Tensor, scale: number): Tensor {
  const op = 'tokenLogProbsBackward';
  const kernel = (k: Kernels): Storage => k.tokenLogProbsBackward(kt(op, logits), kt(op, targets), kt(op, g), scale);
  return runOp(op, [logits, g], logits.shape, logits.dtype, kernel, () => (c, needs) => {
    const p = softmax(mul(logits, scale), -1);
    const cp = sum(mul(c, p), [-1]);
    return [
      needs[0] ? mul(mul(p, sub(c, expandDims(cp, -1))), mul(expandDims(g, -1), -scale * scale)) : null,
      needs[1] ? mul(sub(squeeze(takeAlongAxis(c, expandDims(targets, -1), -1), [-1]), cp), scale) : null,
    ];
  });
}
