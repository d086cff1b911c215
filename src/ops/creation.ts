import type { Backend, Storage } from '../core/backend.js';
import type { Kernels } from '../core/kernels.js';
import {
  allocArray,
  computeDType,
  isHalf,
  toTypedArray,
  type DType,
  type HalfDType,
  type HostArray,
  type TypedArray,
} from '../core/dtype.js';
import { ArgumentError, DTypeError, ShapeError } from '../core/errors.js';
import { roundToHalf } from '../core/half.js';
import type { Rng } from '../core/rng.js';
import { getDefaultBackend } from '../core/runtime.js';
import { assertShape, sizeOf, type Shape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import { identityOp, runSource } from './op.js';

export interface CreateOptions {
  readonly dtype?: DType;
  readonly backend?: Backend;
}

export type NestedArray = number | readonly NestedArray[];

function inferShape(values: NestedArray): number[] {
  const shape: number[] = [];
  let v: NestedArray = values;
  while (Array.isArray(v)) {
    shape.push(v.length);
    v = (v as readonly NestedArray[])[0] ?? 0;
  }
  return shape;
}

function flattenInto(values: NestedArray, out: number[]): void {
  if (Array.isArray(values)) for (const v of values as readonly NestedArray[]) flattenInto(v, out);
  else out.push(values as number);
}

const backendFor = (opts: CreateOptions | undefined): Backend => opts?.backend ?? getDefaultBackend();

/**
 * Make a tensor from numbers: a nested array (shape inferred) or a flat array/typed array with `shape`.
 * The default dtype is f32 (i32 if given an Int32Array). With dtype bf16 or f16 each value is rounded to nearest
 * (ties to even) from its f32 value, as `torch.tensor(values).to(torch.bfloat16)` does; `fromHalfBits` takes the
 * 16-bit words themselves.
 */
export function tensor(values: NestedArray | TypedArray, shape?: Shape, opts?: CreateOptions): Tensor {
  const dtype = opts?.dtype ?? (values instanceof Int32Array ? 'i32' : values instanceof Float64Array ? 'f64' : 'f32');
  let flat: ArrayLike<number>;
  let inferred: Shape;
  if (ArrayBuffer.isView(values)) {
    flat = values as TypedArray;
    inferred = [flat.length];
  } else {
    const out: number[] = [];
    flattenInto(values as NestedArray, out);
    flat = out;
    inferred = inferShape(values as NestedArray);
  }
  const finalShape = shape ?? inferred;
  assertShape('tensor', finalShape);
  if (sizeOf(finalShape) !== flat.length) {
    throw new ShapeError('tensor', [finalShape], `${flat.length} values do not fill the shape`);
  }
  if (!shape && !ArrayBuffer.isView(values)) checkRagged(values as NestedArray, inferred);
  const host = (): HostArray => (isHalf(dtype) ? roundToHalf(dtype, flat) : toTypedArray(dtype, flat));
  return runSource('tensor', backendFor(opts), finalShape, dtype, (_, b) => b.upload(host(), dtype));
}

/**
 * A bf16 or f16 tensor from its 16-bit words as a checkpoint stores them (safetensors BF16/F16, little-endian words
 * read into a Uint16Array): uploaded as they are, no round trip through f32. `data()` reads them back widened.
 */
export function fromHalfBits(words: Uint16Array, shape: Shape, dtype: HalfDType, opts?: { backend?: Backend }): Tensor {
  assertShape('fromHalfBits', shape);
  if (!isHalf(dtype)) throw new DTypeError('fromHalfBits', `dtype must be bf16 or f16, got ${String(dtype)}`);
  if (sizeOf(shape) !== words.length)
    throw new ShapeError('fromHalfBits', [shape], `${words.length} words do not fill the shape`);
  return runSource('fromHalfBits', backendFor(opts), shape, dtype, (_, b) => b.upload(words, dtype));
}

function checkRagged(values: NestedArray, shape: Shape, depth = 0): void {
  if (depth === shape.length) {
    if (Array.isArray(values)) throw new ArgumentError('tensor', 'nested array is ragged');
    return;
  }
  if (!Array.isArray(values) || values.length !== shape[depth])
    throw new ArgumentError('tensor', 'nested array is ragged');
  for (const v of values as readonly NestedArray[]) checkRagged(v, shape, depth + 1);
}

export function scalar(value: number, opts?: CreateOptions): Tensor {
  return tensor([value], [], opts);
}

export function full(shape: Shape, value: number, opts?: CreateOptions): Tensor {
  assertShape('full', shape);
  const dtype = opts?.dtype ?? 'f32';
  // A one-element tensor (the scalars that elementwise ops lift) is uploaded, not filled: no kernel dispatch. No
  // kernel writes half-precision storage, so a bf16/f16 fill is rounded and uploaded from the host.
  const kernel = (k: Kernels, b: Backend): Storage =>
    isHalf(dtype)
      ? b.upload(allocArray(dtype, sizeOf(shape)).fill(roundToHalf(dtype, [value])[0]!), dtype)
      : sizeOf(shape) === 1
        ? b.upload(allocArray(dtype, 1).fill(value), dtype)
        : k.fill(shape, dtype, value);
  return runSource('full', backendFor(opts), shape, dtype, kernel);
}

export const zeros = (shape: Shape, opts?: CreateOptions): Tensor => full(shape, 0, opts);
export const ones = (shape: Shape, opts?: CreateOptions): Tensor => full(shape, 1, opts);

const like = (x: Tensor, opts?: CreateOptions): CreateOptions => {
  identityOp('like', x);
  return { dtype: opts?.dtype ?? x.dtype, backend: opts?.backend ?? x.backend };
};
export const zerosLike = (x: Tensor, opts?: CreateOptions): Tensor => full(x.shape, 0, like(x, opts));
export const onesLike = (x: Tensor, opts?: CreateOptions): Tensor => full(x.shape, 1, like(x, opts));
export const fullLike = (x: Tensor, value: number, opts?: CreateOptions): Tensor => full(x.shape, value, like(x, opts));

/** [start, start+step, ...) below stop. */
export function arange(start: number, stop?: number, step = 1, opts?: CreateOptions): Tensor {
  const [lo, hi] = stop === undefined ? [0, start] : [start, stop];
  if (step === 0) throw new ArgumentError('arange', 'step must not be 0');
  const n = Math.max(0, Math.ceil((hi - lo) / step));
  const values = allocArray(computeDType(opts?.dtype ?? 'f32'), n);
  for (let i = 0; i < n; i++) values[i] = lo + i * step;
  return tensor(values, [n], opts);
}

/** Standard normal values times `std`, from a seeded generator. */
export function randn(shape: Shape, rng: Rng, opts?: CreateOptions & { std?: number }): Tensor {
  const dtype = opts?.dtype ?? 'f32';
  const values = allocArray(computeDType(dtype), sizeOf(shape));
  const std = opts?.std ?? 1;
  for (let i = 0; i < values.length; i++) values[i] = rng.normal() * std;
  return tensor(values, shape, { ...opts, dtype });
}

/** Uniform values in [lo, hi), from a seeded generator. */
export function uniform(shape: Shape, rng: Rng, lo = 0, hi = 1, opts?: CreateOptions): Tensor {
  const dtype = opts?.dtype ?? 'f32';
  const values = allocArray(computeDType(dtype), sizeOf(shape));
  for (let i = 0; i < values.length; i++) values[i] = lo + (hi - lo) * rng.uniform();
  return tensor(values, shape, { ...opts, dtype });
}

/** Copy a tensor to another backend (awaits the read on an async source). */
export async function toBackend(x: Tensor, backend: Backend): Promise<Tensor> {
  const values = await x.data();
  return tensor(values, x.shape, { dtype: x.dtype, backend });
}
