import type { Backend, KernelTensor, MemoryInfo, Storage } from '../../core/backend.js';
import { allocArray, isHalf, type DType, type HalfDType, type HostArray, type TypedArray } from '../../core/dtype.js';
import { BackendError } from '../../core/errors.js';
import { widenHalf } from '../../core/half.js';
import { sizeOf, type Shape } from '../../core/shape.js';

/**
 * A backend whose storage is a typed array in host memory: what the reference kernels run on. They take it as
 * their first argument and allocate their outputs with `alloc`, so any such backend (the reference one, the CPU
 * one, a backend whose arrays are views into a WebAssembly memory) can run every reference kernel on its own
 * storage, as its fallback (`fallbackKernels: 'reference'`).
 */
export interface HostBackend extends Backend {
  /**
   * A new array of `size` entries of `dtype`, zero-filled (kernels rely on it: pad, scatter-adds, gathers of an
   * out-of-range index), owned by this backend until `free` gets it back as storage. Kernels write f32, f64 or
   * i32 only: bf16/f16 storage is made by `upload` alone (a half dtype here is a `BackendError`).
   */
  alloc(dtype: DType, size: number): TypedArray;
}

/**
 * A host backend's storage is the typed array itself, read by the kernels for as long as they run. (A backend
 * whose arrays are views into a WebAssembly memory must not grow that memory while views are live: growth
 * detaches every view.)
 */
export const arr = (s: Storage): TypedArray => s as unknown as TypedArray;
export const store = (a: TypedArray): Storage => a as unknown as Storage;
export const data = (x: KernelTensor): TypedArray => arr(x.storage);
/** The 16-bit words of a bf16/f16 tensor (the kernels that read one widen each word as they go). */
export const halfData = (x: KernelTensor): Uint16Array => x.storage as unknown as Uint16Array;

/** A kernel may only allocate the dtypes it computes in. */
export function checkKernelDType(backend: string, dtype: DType): void {
  if (isHalf(dtype)) throw new BackendError(backend, `kernels write f32, f64 or i32, not ${dtype} (upload it instead)`);
}

/** A host backend's read of its own storage: a copy, a bf16/f16 tensor's widened to f32. */
export function readHost(x: KernelTensor, stored: HostArray): TypedArray {
  if (isHalf(x.dtype)) return widenHalf(x.dtype as HalfDType, stored as Uint16Array);
  const out = allocArray(x.dtype as Exclude<DType, HalfDType>, stored.length);
  out.set(stored);
  return out;
}

/** Split a shape at `axis` into (outer, axis length, inner) for row and indexing kernels. */
export const splitAt = (shape: Shape, axis: number): [number, number, number] => [
  sizeOf(shape.slice(0, axis)),
  shape[axis]!,
  sizeOf(shape.slice(axis + 1)),
];

/**
 * Typed arrays from the JavaScript heap, counted: the memory half of a host backend (upload, read, free, memory),
 * each backend with its own counts.
 */
export class HeapMemory {
  private buffers = 0;
  private bytes = 0;

  alloc(dtype: DType, size: number): TypedArray {
    checkKernelDType('reference', dtype);
    return this.allocAny(dtype, size) as TypedArray;
  }

  private allocAny(dtype: DType, size: number): HostArray {
    const a = allocArray(dtype, size);
    this.buffers++;
    this.bytes += a.byteLength;
    return a;
  }

  upload(values: HostArray, dtype: DType): Storage {
    const a = this.allocAny(dtype, values.length);
    a.set(values);
    return a as unknown as Storage;
  }

  readSync(x: KernelTensor): TypedArray {
    return readHost(x, x.storage as unknown as HostArray);
  }

  free(storage: Storage): void {
    this.buffers--;
    this.bytes -= arr(storage).byteLength;
  }

  memory(): MemoryInfo {
    return { buffers: this.buffers, bytes: this.bytes };
  }
}
