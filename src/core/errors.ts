/** Typed errors. Every error the library throws on bad input is one of these, with a message naming what was wrong. */

export type Shape = readonly number[];

const fmt = (s: Shape): string => `[${s.join(', ')}]`;

/**
 * Text for a message, with every character that could act on a terminal written out: C0 controls (NUL, ESC, CR,
 * LF, ...), DEL and C1 controls as `\xNN`, and the line and paragraph separators and bidirectional overrides as
 * `\u{NNNN}`. Names and values that came from files (a weight_map's tensor names, a dataset line) can then be put
 * in a message as they are: the message stays one line, and no escape sequence reaches a terminal. Idempotent.
 */
export function escapeControls(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it escapes
  return text.replace(/[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}

/**
 * What a JSON.parse failure says, for a message. V8 quotes the text around an unexpected token (`Unexpected token
 * 'r', "root:x:0:0"... is not valid JSON`): kept only with `quote` (a line of the user's own data, say). Without
 * it (a model's or checkpoint's files, which may be links to anywhere), only the kind of error and its position.
 */
export function jsonSyntaxDetail(e: unknown, quote = false): string {
  const message = e instanceof Error ? e.message : String(e);
  if (quote) return message;
  if (message === 'Unexpected end of JSON input') return message;
  // The messages that quote nothing: fixed words and a position (`Expected ',' or '}' after property value in
  // JSON at position 9`, with ` (line 1 column 10)` in newer V8).
  if (/^[A-Za-z ,:'{}[\]-]+ JSON at position \d+( \(line \d+ column \d+\))?$/.test(message)) return message;
  return message.startsWith('Unexpected token') ? 'Unexpected token' : 'a syntax error';
}

export class RlvrError extends Error {
  constructor(message: string) {
    // Messages are one line and may carry names from files: no control character reaches a terminal raw.
    super(escapeControls(message));
    this.name = new.target.name;
  }
}

/** At most the first `n` characters of text a user gave, for a message: a 100 KB value is not echoed whole. */
export const clipText = (text: string, n = 80): string =>
  text.length > n ? `${text.slice(0, n)}... (${text.length} characters)` : text;

/**
 * A value as a message quotes it, clipped: strings and records as JSON (`"grpo"`, `[1,2]`), everything else as
 * `String` writes it, so NaN and Infinity read as themselves where JSON would write null. Never throws: a record
 * JSON cannot write (a cycle, a BigInt inside) falls back to `String`.
 */
export function quoteValue(value: unknown): string {
  if (typeof value === 'string' || (typeof value === 'object' && value !== null)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined) return clipText(json);
    } catch {
      // falls through to String
    }
  }
  try {
    return clipText(String(value));
  } catch {
    return '(a value with no text form)'; // an object without a prototype, which String cannot convert
  }
}

/**
 * A bad setting: the field it names, the value given and why. The config errors of each layer (the trainer's,
 * an objective's, BICC's) extend it, each with its own message, quoting the value by `quoteValue`.
 */
export class FieldError extends RlvrError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    readonly reason: string,
    message: string,
  ) {
    super(message);
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
    why = 'was used after it was disposed',
  ) {
    super(`${op}: tensor #${tensorId} ${why}`);
  }
}

/**
 * A tensor was used after it was donated to an op that consumes its argument (`updateSlice`, `adamwStep` with
 * `donate`), as JAX refuses a deleted donated buffer: the op may have written its result into the storage, so the
 * handle no longer holds the old value. `consumer` names that op.
 */
export class DonatedTensorError extends DisposedTensorError {
  constructor(
    op: string,
    tensorId: number,
    readonly consumer: string,
  ) {
    super(op, tensorId, `was donated to ${consumer} and can no longer be used`);
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
