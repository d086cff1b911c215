import type { Backend, KernelTensor, Storage } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
import { BackendMismatchError, NonFiniteError } from '../core/errors.js';
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
let debugNans = false;

/**
 * Like JAX's `jax_debug_nans`: when on, every op checks its output on a synchronous backend and throws a
 * `NonFiniteError` naming the op that first produced a NaN or infinity. Off by default (it reads every result).
 */
export function setDebugNans(on: boolean): void {
  debugNans = on;
}

function checkFinite(op: string, y: Tensor): void {
  if (!y.backend.synchronous || y.dtype === 'i32') return;
  const values = y.dataSync();
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i]!)) throw new NonFiniteError(`${op} output`, i, values[i]!);
}

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
  if (debugNans) checkFinite(op, y);
  if (vjp) recordOp(op, inputs, y, vjp(y));
  return y;
}
