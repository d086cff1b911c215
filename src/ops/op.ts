import type { Backend, KernelTensor, Storage } from '../core/backend.js';
import { kernelsFor, type Kernels } from '../core/kernels.js';
import { isHalf, type DType } from '../core/dtype.js';
import {
  ArgumentError,
  BackendError,
  BackendMismatchError,
  DTypeError,
  NonFiniteError,
  NotDifferentiableError,
  SecondOrderError,
  type RlvrError,
} from '../core/errors.js';
import { throwDeferredFailure } from '../core/deferred.js';
import type { Shape } from '../core/shape.js';
import { recordOp, trackedByActiveTape, type VjpRule } from '../core/tape.js';
import { Tensor } from '../core/tensor.js';

/**
 * The one door every op goes through. Each form checks that its inputs are alive and share a backend, runs the
 * kernel (or makes a view, or fills a new tensor), checks the outputs when `setDebugNans` is on, and records the
 * vector-Jacobian rule (or a refusal) on every tape that tracks an input. A kernel callback gets the backend's
 * resolved kernel table (`kernelsFor(backend)`, `core/kernels.ts`) and the backend itself:
 * `runOp(op, inputs, shape, dtype, (k) => k.matmul(...), vjp)`.
 *
 * - `runOp(op, inputs, shape, dtype, kernel, vjp?)`: one kernel, one output (most ops);
 * - `runOpMulti(op, inputs, outputs, kernel, vjp?)`: one kernel, several outputs with a rule each (`rotaryPair`,
 *   AdamW);
 * - `runBackward(op, inputs, likes, kernel)`: a fused backward kernel, one gradient per `likes` tensor, refusing a
 *   second derivative (the norms', SwiGLU's and attention's backward);
 * - `runView(op, x, shape, vjp)`: an output sharing x's storage (reshape);
 * - `runSource(op, backend, shape, dtype, kernel)`: no inputs (creation: fill, upload);
 * - `runDonating(op, donated, inputs, kernel, vjp)`: consumes its first input, whose storage the kernel may
 *   update in place (JAX's buffer donation); `runDonatingMulti` consumes several, one output each (AdamW's
 *   parameters and moments);
 * - `identityOp(op, x)`: an op that returns its input unchanged (a no-op cast, reshape, permute, slice), admitted
 *   like any other so a disposed input is still an error.
 *
 * A rule may be `refuseGradient(...)`: the op runs, and a tape that reaches it throws instead of differentiating.
 */

/** The view of a tensor a kernel gets; throws a typed error if it was disposed. */
export const kt = (op: string, t: Tensor): KernelTensor => ({
  storage: t.storageFor(op),
  shape: t.shape,
  dtype: t.dtype,
});

export function backendOf(op: string, inputs: readonly Tensor[]): Backend {
  const b = inputs[0]!.backend;
  for (const x of inputs)
    if (x.backend !== b)
      throw new BackendMismatchError(
        op,
        inputs.map((t) => t.backend.name),
      );
  return b;
}

/** A rule that forbids differentiation: recorded like any rule, it throws when a backward pass reaches it. */
export interface Refusal {
  readonly refuse: (op: string) => RlvrError;
}

export const refuseGradient = (make: (op: string) => RlvrError = (op) => new NotDifferentiableError(op)): Refusal => ({
  refuse: make,
});

const isRefusal = (x: unknown): x is Refusal => typeof x === 'object' && x !== null && 'refuse' in x;

const refusingRule =
  (op: string, r: Refusal): VjpRule =>
  () => {
    throw r.refuse(op);
  };

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
  for (let i = 0; i < values.length; i++)
    if (!Number.isFinite(values[i]!)) throw new NonFiniteError(`${op} output`, i, values[i]!);
}

/**
 * The ops whose kernels read bf16/f16 storage, widening each element to f32 as they load it: matmul (its B
 * operand), gather (an embedding lookup) and cast (to f32, an explicit widening). Each checks which operand may
 * be half itself. Any other op would read the 16-bit words as garbage, or need a whole f32 copy of a weight that
 * is stored narrow to save memory: refused here, naming the op.
 */
const HALF_READERS: ReadonlySet<string> = new Set(['matmul', 'gather', 'cast']);

/**
 * Every input alive and on one backend, and no bf16/f16 input to an op that cannot read it: every form's checks.
 * A view or an identity (`runView`, `identityOp`) reads no element, so it takes any dtype (`halfOk`).
 */
function admit(op: string, inputs: readonly Tensor[], halfOk = HALF_READERS.has(op)): Backend {
  throwDeferredFailure();
  for (const x of inputs) x.storageFor(op);
  if (!halfOk) for (const x of inputs) if (isHalf(x.dtype)) throw halfInputError(op, x.dtype);
  return backendOf(op, inputs);
}

/** The error of an op given a bf16/f16 tensor it cannot read. */
export const halfInputError = (op: string, dtype: DType): DTypeError =>
  new DTypeError(
    op,
    `got a ${dtype} tensor; bf16/f16 storage is read only by matmul (as its B operand), gather and cast to f32 ` +
      `(cast(x, 'f32') makes a whole f32 copy)`,
  );

/** The common tail of every form: debug checks, then the rules on the tapes. */
function finish(op: string, inputs: readonly Tensor[], ys: readonly Tensor[], rules: readonly VjpRule[] | null): void {
  if (debugNans) for (const y of ys) checkFinite(op, y);
  if (rules) ys.forEach((y, i) => recordOp(op, inputs, y, rules[i]!));
}

/** An op whose result is one of its inputs unchanged (a no-op reshape, cast or permute): checked like any op. */
export function identityOp(op: string, x: Tensor): Tensor {
  admit(op, [x], true);
  return x;
}

export function runOp(
  op: string,
  inputs: readonly Tensor[],
  shape: Shape,
  dtype: DType,
  kernel: (k: Kernels, backend: Backend) => Storage,
  vjp?: ((y: Tensor) => VjpRule) | Refusal,
): Tensor {
  const backend = admit(op, inputs);
  const y = Tensor.fromStorage(backend, kernel(kernelsFor(backend), backend), shape, dtype);
  finish(op, inputs, [y], vjp === undefined ? null : [isRefusal(vjp) ? refusingRule(op, vjp) : vjp(y)]);
  return y;
}

export interface OutputSpec {
  readonly shape: Shape;
  readonly dtype: DType;
}

/** One kernel, several outputs; `vjp` gives one rule per output (each output's cotangent flows separately). */
export function runOpMulti(
  op: string,
  inputs: readonly Tensor[],
  outputs: readonly OutputSpec[],
  kernel: (k: Kernels, backend: Backend) => readonly Storage[],
  vjp?: ((ys: readonly Tensor[]) => readonly VjpRule[]) | Refusal,
): Tensor[] {
  const backend = admit(op, inputs);
  const storages = kernel(kernelsFor(backend), backend);
  const ys = outputs.map((o, i) => Tensor.fromStorage(backend, storages[i]!, o.shape, o.dtype));
  const rules = vjp === undefined ? null : isRefusal(vjp) ? ys.map(() => refusingRule(op, vjp)) : vjp(ys);
  finish(op, inputs, ys, rules);
  return ys;
}

/**
 * A fused backward kernel: one gradient per tensor of `likes` (same shapes and dtypes), through the door like any
 * op. It has no rule of its own: an outer tape that reaches it throws `SecondOrderError` rather than being wrong.
 */
export function runBackward(
  op: string,
  inputs: readonly Tensor[],
  likes: readonly Tensor[],
  kernel: (k: Kernels, backend: Backend) => readonly Storage[],
): Tensor[] {
  return runOpMulti(
    op,
    inputs,
    likes,
    kernel,
    refuseGradient((name) => new SecondOrderError(name)),
  );
}

/**
 * An op that consumes `donated` (like a JAX argument in `donate_argnums`): `runDonatingMulti` with one output.
 */
export function runDonating(
  op: string,
  donated: Tensor,
  inputs: readonly Tensor[],
  kernel: (k: Kernels, inPlace: boolean, backend: Backend) => Storage,
  vjp: ((y: Tensor) => VjpRule) | Refusal,
): Tensor {
  const rules = isRefusal(vjp) ? vjp : (ys: readonly Tensor[]) => [vjp(ys[0]!)];
  return runDonatingMulti(op, [donated], inputs, (k, inPlace, b) => [kernel(k, inPlace[0]!, b)], rules)[0]!;
}

/**
 * An op that consumes every tensor of `donated` (JAX's `donate_argnums`), with one output per donated tensor (of
 * its shape and dtype), reading `others` as well. Afterwards each donated handle is consumed, whatever happened:
 * once nothing else holds it, a use throws `DonatedTensorError` naming the op. The kernel gets `inPlace[j]` true
 * when donated[j] is the only reference to its storage (no view, no tape holds it, no active tape tracks it, and
 * it is not also among `others`): it then writes output j into that storage and returns it, and the output takes
 * it over without a copy. Otherwise it returns new storage (the old one stays intact for whoever else holds it).
 * A tensor donated twice is an `ArgumentError` (two outputs cannot take one storage over).
 */
export function runDonatingMulti(
  op: string,
  donated: readonly Tensor[],
  others: readonly Tensor[],
  kernel: (k: Kernels, inPlace: readonly boolean[], backend: Backend) => readonly Storage[],
  vjp: ((ys: readonly Tensor[]) => readonly VjpRule[]) | Refusal,
): Tensor[] {
  const backend = admit(op, [...donated, ...others]);
  const seen = new Set<Tensor>();
  for (const d of donated) {
    if (seen.has(d)) throw new ArgumentError(op, `tensor #${d.id} is donated twice`);
    seen.add(d);
  }
  const read = new Set(others);
  const inPlace = donated.map((d) => d.uniquelyOwned && !trackedByActiveTape(d) && !read.has(d));
  const storages = kernel(kernelsFor(backend), inPlace, backend);
  donated.forEach((d, j) => {
    if (inPlace[j] && storages[j] !== d.storageFor(op))
      throw new BackendError(backend.name, `${op}: the kernel did not write output ${j} in place`);
  });
  donated.forEach((d, j) => {
    if (inPlace[j]) d.donate(op);
  });
  const ys = donated.map((d, j) => Tensor.fromStorage(backend, storages[j]!, d.shape, d.dtype));
  const rules = isRefusal(vjp) ? ys.map(() => refusingRule(op, vjp)) : vjp(ys);
  // A donated handle is gone: the tapes see only the other inputs (none tracked the donated one).
  finish(op, [...donated.filter((_, j) => !inPlace[j]), ...others], ys, rules);
  for (const d of donated) d.consume(op);
  return ys;
}

/** A new handle over x's storage with another shape of the same size (no kernel runs). */
export function runView(op: string, x: Tensor, shape: Shape, vjp: (y: Tensor) => VjpRule): Tensor {
  admit(op, [x], true);
  const y = Tensor.view(x, shape);
  finish(op, [x], [y], [vjp(y)]);
  return y;
}

/**
 * A tensor made from nothing but its backend (fill, upload): nothing to differentiate, and not checked by
 * `setDebugNans` (a NaN or -Infinity written as a constant is the caller's choice, not an op's failure).
 */
export function runSource(
  op: string,
  backend: Backend,
  shape: Shape,
  dtype: DType,
  kernel: (k: Kernels, backend: Backend) => Storage,
): Tensor {
  if (!backend.supportsDType(dtype))
    throw new DTypeError(op, `backend ${backend.name} does not support dtype ${dtype}`);
  return Tensor.fromStorage(backend, kernel(kernelsFor(backend), backend), shape, dtype);
}
