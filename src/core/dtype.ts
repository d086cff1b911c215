/** Element types. `f64` is a CPU-only precision used by gradient checks; `i32` holds token ids and indices. */
export type DType = 'f32' | 'f64' | 'i32';

export type TypedArray = Float32Array | Float64Array | Int32Array;

export const isFloat = (d: DType): boolean => d !== 'i32';

export const bytesPerElement = (d: DType): number => (d === 'f64' ? 8 : 4);

export function allocArray(dtype: DType, size: number): TypedArray {
  switch (dtype) {
    case 'f32':
      return new Float32Array(size);
    case 'f64':
      return new Float64Array(size);
    case 'i32':
      return new Int32Array(size);
  }
}

export function toTypedArray(dtype: DType, values: ArrayLike<number>): TypedArray {
  const out = allocArray(dtype, values.length);
  out.set(values);
  return out;
}

const rank: Record<DType, number> = { i32: 0, f32: 1, f64: 2 };

/** The dtype two operands are promoted to: i32 < f32 < f64 (as JAX and NumPy do for these three). */
export const promote = (a: DType, b: DType): DType => (rank[a] >= rank[b] ? a : b);
