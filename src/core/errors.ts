/** Typed errors. Every error the library throws on bad input is one of these, with a message naming what was wrong. */

export type Shape = readonly number[];

const fmt = (s: Shape): string => `[${s.join(', ')}]`;

export class RlvrError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Two shapes (or a shape and an argument) do not fit together in an op. */
export class ShapeError extends RlvrError {
  constructor(
    readonly op: string,
    readonly shapes: readonly Shape[],
    detail: string,
  ) {
    super(`${op}: ${detail} (shapes ${shapes.map(fmt).join(' and ')})`);
  }
}

export class DTypeError extends RlvrError {
  constructor(
    readonly op: string,
    detail: string,
  ) {
    super(`${op}: ${detail}`);
  }
}

/** An argument other than a shape is invalid (an axis out of range, a bad permutation, ...). */
export class ArgumentError extends RlvrError {
  constructor(
    readonly op: string,
    detail: string,
  ) {
    super(`${op}: ${detail}`);
  }
}

/** A tensor was used after its last reference was released. */
export class DisposedTensorError extends RlvrError {
  constructor(
    readonly op: string,
    readonly tensorId: number,
  ) {
    super(`${op}: tensor #${tensorId} was used after it was disposed`);
  }
}

/** A backward pass reached an op whose rule refuses differentiation (an optimizer step, a fused backward). */
export class NotDifferentiableError extends RlvrError {
  constructor(readonly op: string) {
    super(`${op}: is not differentiable; compute it outside the transformed function (or under stopGradient)`);
  }
}

/** A second derivative reached a fused backward kernel (a norm's, attention's, SwiGLU's), which has no rule. */
export class SecondOrderError extends RlvrError {
  constructor(readonly op: string) {
    super(`${op}: second-order gradients through this fused backward kernel are not implemented`);
  }
}

/** An index tensor holds a value outside [0, size) of the axis it indexes. */
export class IndexRangeError extends RlvrError {
  constructor(
    readonly op: string,
    readonly index: number,
    readonly value: number,
    readonly size: number,
  ) {
    const at = index >= 0 ? ` at flat position ${index}` : ''; // a device-side check knows only the value
    super(`${op}: index ${value}${at} is out of range for an axis of size ${size}`);
  }
}

/** Tensors from two different backends were mixed in one op. */
export class BackendMismatchError extends RlvrError {
  constructor(
    readonly op: string,
    readonly backends: readonly string[],
  ) {
    super(`${op}: inputs live on different backends (${backends.join(', ')}); move them with toBackend()`);
  }
}

/** A backend cannot do what was asked (a dtype it lacks, a synchronous read on an async device, ...). */
export class BackendError extends RlvrError {
  constructor(
    readonly backend: string,
    detail: string,
  ) {
    super(`${backend}: ${detail}`);
  }
}

/** A backend has no kernel of this name: none registered for it, and none in its fallback backend (if any). */
export class MissingKernelError extends BackendError {
  constructor(
    readonly kernel: string,
    backend: string,
    readonly fallback?: string,
  ) {
    const tried = fallback === undefined ? 'and it has no fallback' : `nor for its fallback '${fallback}'`;
    super(backend, `no kernel '${kernel}' is registered for backend '${backend}', ${tried}`);
  }
}

/** A kernel was registered twice for one backend name. */
export class DuplicateKernelError extends RlvrError {
  constructor(
    readonly kernel: string,
    readonly backend: string,
  ) {
    super(`kernel '${kernel}' is already registered for backend '${backend}'`);
  }
}

/** A value that must be finite was NaN or infinite. */
export class NonFiniteError extends RlvrError {
  constructor(
    readonly what: string,
    readonly index: number,
    readonly value: number,
  ) {
    super(`${what}: non-finite value ${value} at flat index ${index}`);
  }
}
