import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { neg } from './elementwise.js';
import { wrapBackward } from './norm.js';
import { kt, runOp } from './op.js';
import { mean, sum } from './reduce.js';

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

/**
 * Log-probability of each target token: logSoftmax(scale * logits)[..., target], logits [..., V], targets [...]
 * -> [...], in one fused kernel (the [..., V] log-softmax is never stored; the backward writes d logits once).
 * `scale` is 1 / temperature. A target outside [0, V) gives NaN. Differentiable once in the logits.
 */
export function tokenLogProbs(logits: Tensor, targets: Tensor, scale = 1): Tensor {
  const op = 'tokenLogProbs';
  if (targets.dtype !== 'i32') throw new DTypeError(op, `targets must be i32, got ${targets.dtype}`);
  if (logits.rank < 1 || targets.rank !== logits.rank - 1 || targets.shape.some((d, i) => d !== logits.shape[i])) {
    throw new ShapeError(op, [logits.shape, targets.shape], 'targets must have the logits shape without the last axis');
  }
  if (!Number.isFinite(scale)) throw new ArgumentError(op, `scale must be finite, got ${scale}`);
  return runOp(op, [logits, targets], targets.shape, logits.dtype, (b) => b.tokenLogProbs(kt(op, logits), kt(op, targets), scale), () => (g) => {
    const dx = logits.backend.tokenLogProbsBackward(kt(op, logits), kt(op, targets), kt(op, g), scale);
    return [...wrapBackward('tokenLogProbsBackward', [logits, targets, g], [{ storage: dx, like: logits }]), null];
  });
}
