import type { Backend, KernelTensor, Storage } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import { BackendMismatchError } from '../core/errors.js';
import type { Shape } from '../core/shape.js';
import { recordOp, type VjpRule } from '../core/tape.js';
import { Tensor } from '../core/tensor.js';

/** The view of a tensor a kernel gets; throws a typed error if it was disposed. */
export const kt = (op: string, t: Tensor): KernelTensor => ({ storage: t.storageFor(op), shape: t.shape, dtype: t.dtype });

export function backendOf(op: string, inputs: readonly Tensor[]): Backend {
  const b = inputs[0]!.backend;
  for (const x of inputs) if (x.backend !== b) throw new BackendMismatchError(op, inputs.map((t) => t.backend.name));
  return b;
}

/**
 * Run one primitive: check the inputs share a backend, run its kernel, wrap the result, and record the
 * vector-Jacobian rule on any tape that tracks an input. Every op in `src/ops/` goes through here.
 */
export function runOp(
  op: string,
  inputs: readonly Tensor[],
  shape: Shape,
  dtype: DType,
  kernel: (backend: Backend) => Storage,
  vjp?: (y: Tensor) => VjpRule,
): Tensor {
  const backend = backendOf(op, inputs);
  const y = Tensor.fromStorage(backend, kernel(backend), shape, dtype);
  if (vjp) recordOp(op, inputs, y, vjp(y));
  return y;
}
