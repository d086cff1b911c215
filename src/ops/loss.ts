import { DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { neg } from './elementwise.js';
import { takeAlongAxis } from './indexing.js';
import { expandDims, squeeze } from './movement.js';
import { mean, sum } from './reduce.js';
import { logSoftmax } from './softmax.js';

export type Reduction = 'mean' | 'sum' | 'none';

/**
 * Cross-entropy of integer targets under logits along the last axis: -log softmax(logits)[target].
 * logits [..., V], targets [...] (i32). Reduction as in PyTorch (default mean).
 */
export function crossEntropy(logits: Tensor, targets: Tensor, reduction: Reduction = 'mean'): Tensor {
  if (targets.dtype !== 'i32') throw new DTypeError('crossEntropy', `targets must be i32, got ${targets.dtype}`);
  if (targets.rank !== logits.rank - 1 || targets.shape.some((d, i) => d !== logits.shape[i])) {
    throw new ShapeError('crossEntropy', [logits.shape, targets.shape], 'targets must have the logits shape without the last axis');
  }
  const losses = neg(tokenLogProbs(logits, targets));
  return reduction === 'none' ? losses : reduction === 'sum' ? sum(losses) : mean(losses);
}

/** Log-probability of each target token: logSoftmax(logits)[..., target]. logits [..., V], targets [...] -> [...]. */
export function tokenLogProbs(logits: Tensor, targets: Tensor): Tensor {
  if (targets.dtype !== 'i32') throw new DTypeError('tokenLogProbs', `targets must be i32, got ${targets.dtype}`);
  return squeeze(takeAlongAxis(logSoftmax(logits, -1), expandDims(targets, -1), -1), [-1]);
}
