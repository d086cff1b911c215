/**
 * Element types. `f64` is a CPU-only precision used by gradient checks; `i32` holds token ids and indices.
 * `bf16` and `f16` are storage types for frozen weights (a checkpoint's own dtype): 2 bytes per element, held as
 * 16-bit words, read only by the kernels that widen them to f32 on the fly (matmul's B operand, gather along
 * axis 0, cast to f32); every other op refuses them (`DTypeError`), and no gradient flows into them.
 */
export type DType = 'f32' | 'f64' | 'i32' | 'bf16' | 'f16';

/** The half-precision storage dtypes. */
export type HalfDType = 'bf16' | 'f16';

/** What `data()` returns: a half-precision tensor reads back widened to f32. */
export type TypedArray = Float32Array | Float64Array | Int32Array;

/** What a host backend stores: a typed array, or the raw 16-bit words of a bf16/f16 tensor. */
export type HostArray = TypedArray | Uint16Array;

/** The dtypes kernels compute in and write. */
export type WideDType = Exclude<DType, HalfDType>;

export const isHalf = (d: DType): d is HalfDType => d === 'bf16' || d === 'f16';

/** The dtype values of `d` are computed in: f32 for the half-precision storage dtypes, else `d` itself. */
export const computeDType = (d: DType): WideDType => (isHalf(d) ? 'f32' : d);

export const isFloat = (d: DType): boolean => d !== 'i32';

export const bytesPerElement = (d: DType): number => (d === 'f64' ? 8 : isHalf(d) ? 2 : 4);

/** A zero-filled array of `size` elements of `dtype` (16-bit words for bf16 and f16). */
export function allocArray(dtype: HalfDType, size: number): Uint16Array;
export function allocArray(dtype: WideDType, size: number): TypedArray;
export function allocArray(dtype: DType, size: number): HostArray;
export function allocArray(dtype: DType, size: number): HostArray {
  switch (dtype) {
    case 'f32':
      return new Float32Array(size);
    case 'f64':
      return new Float64Array(size);
    case 'i32':
      return new Int32Array(size);
    case 'bf16':
    case 'f16':
      return new Uint16Array(size);
  }
}

/** The dtype's array holding `values` (for bf16/f16: each value rounded to nearest even, see `core/half.ts`). */
export function toTypedArray(dtype: WideDType, values: ArrayLike<number>): TypedArray {
  const out = allocArray(dtype, values.length);
  out.set(values);
  return out;
}

const rank: Record<WideDType, number> = { i32: 0, f32: 1, f64: 2 };

/**
 * The dtype two operands are promoted to: i32 < f32 < f64 (as JAX and NumPy do for these three). Half-precision
 * storage never promotes (the ops refuse it before they promote: a silent f32 copy is what it exists to avoid).
 */
export const promote = (a: WideDType, b: WideDType): DType => (rank[a] >= rank[b] ? a : b);
