import { ShapeError } from '../core/errors.js';
import type { Tensor } from '../core/tensor.js';
import { kt, runBackward, runOp } from './op.js';

/** silu(gate) * up (SwiGLU's gate, Shazeer 2020, Eq. 6) in one kernel, its backward in one more. Same shapes. */
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  if (gate.rank !== up.rank || gate.shape.some((n, i) => n !== up.shape[i]))
    throw new ShapeError('swiglu', [gate.shape, up.shape], 'gate and up must have the same shape');
  return runOp(
    'swiglu',
    [gate, up],
    gate.shape,
    gate.dtype,
    (k) => k.swiglu(kt('swiglu', gate), kt('swiglu', up)),
    () => (g) => {
      const op = 'swigluBackward';
      return runBackward(op, [gate, up, g], [gate, up], (k) => k.swigluBackward(kt(op, gate), kt(op, up), kt(op, g)));
    },
  );
}
