import { normAxis } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { cast, exp, mul, sub } from './elementwise.js';
import { kt, runOp } from './op.js';
import { sum } from './reduce.js';

/** Softmax along `axis` (i32 input promoted to f32), computed stably by the kernel (max subtracted). dx = y * (g - sum(g * y)). */
export function softmax(x: Tensor, axis = -1): Tensor {
  if (x.dtype === 'i32') return softmax(cast(x, 'f32'), axis);
  const a = normAxis('softmax', axis, x.rank);
  return runOp(
    'softmax',
    [x],
    x.shape,
    x.dtype,
    (k) => k.softmax(kt('softmax', x), a, false),
    (y) => (g) => [mul(y, sub(g, sum(mul(g, y), a, true)))],
  );
}

/** log(softmax(x)) along `axis`, stably: x - logsumexp(x). dx = g - softmax(x) * sum(g). */
export function logSoftmax(x: Tensor, axis = -1): Tensor {
  if (x.dtype === 'i32') return logSoftmax(cast(x, 'f32'), axis);
  const a = normAxis('logSoftmax', axis, x.rank);
  return runOp(
    'logSoftmax',
    [x],
    x.shape,
    x.dtype,
    (k) => k.softmax(kt('logSoftmax', x), a, true),
    (y) => (g) => [sub(g, mul(exp(y), sum(g, a, true)))],
  );
}
