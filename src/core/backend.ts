import type { DType, HostArray, TypedArray } from './dtype.js';
import type { Shape } from './shape.js';

/**
 * What a backend is: its identity and its memory. Its kernels are not here: they are registered by (kernel,
 * backend name) in `core/kernels.ts`, and the op layer gets them through `kernelsFor(backend)`.
 *
 * Storage is opaque to the op layer: a typed array on the host backends, a GPUBuffer on WebGPU.
 */
export interface Storage {
  readonly __storage: unique symbol;
}

export interface KernelTensor {
  readonly storage: Storage;
  readonly shape: Shape;
  readonly dtype: DType;
}

export interface MemoryInfo {
  /** Live allocations (buffers or typed arrays) owned by the backend. */
  readonly buffers: number;
  readonly bytes: number;
}

export interface Backend {
  /** Its name in the backend registry (`src/backends/registry.ts`), and the name its kernels are registered under. */
  readonly name: string;
  supportsDType(dtype: DType): boolean;
  /** Whether `readSync` works (the host backends) or only the async `read` (WebGPU). */
  readonly synchronous: boolean;
  /**
   * Whether a row's results are independent of the batch's shape (its width, padding, other rows), so the KV-cache
   * sampler's log-probs equal a full forward's bit for bit. A GPU picks kernels and tilings by shape: false there.
   */
  readonly batchInvariant: boolean;
  /** One line naming the backend and its device, for logs and reports. */
  describe(): string;
  /** The largest single buffer it can bind (a GPU's storage-binding limit); undefined: host memory bounds it. */
  readonly maxBufferBytes?: number;
  /** The most memory it can hold in all (a WebAssembly memory's size limit); undefined: the host's memory. */
  readonly maxMemoryBytes?: number;
  /** What limits `maxMemoryBytes`, in words, for a refusal ("the cpu backend's WebAssembly memory: 4 GiB"). */
  readonly memoryNote?: string;
  /**
   * More than `maxMemoryBytes` that the backend holds on another runtime, for a refusal's list of what would fit:
   * the bytes, and how to get them ("Node >= 24, whose WebAssembly memory64 holds up to 16 GiB").
   */
  readonly largerMemory?: { readonly bytes: number; readonly how: string };
  /**
   * Make room for a run estimated at `bytes`, before it allocates anything, where the backend can (the CPU backend
   * takes its memory64 build past its 32-bit memory's limit); `maxMemoryBytes` and `memoryNote` then describe it.
   */
  reserveFor?(bytes: number): void;
  /**
   * The backend name whose kernels run a kernel this backend has not registered, on this backend's storage ("my
   * storage is readable by that backend's kernels": `'reference'` for a host backend whose storage is typed
   * arrays). Each such call is counted (`fallbackCounts` in `core/kernels.ts`). Undefined: a missing kernel throws.
   */
  readonly fallbackKernels?: string;

  /** New storage holding `values` (the 16-bit words themselves for bf16 and f16: `values` is a Uint16Array). */
  upload(values: HostArray, dtype: DType): Storage;
  /** The values on the host; a bf16/f16 tensor's widened to f32 (exactly). */
  read(x: KernelTensor): Promise<TypedArray>;
  readSync(x: KernelTensor): TypedArray;
  free(storage: Storage): void;
  memory(): MemoryInfo;
  /** Release the device. The backend is unusable afterwards. */
  dispose(): void;
  /**
   * Record `fn` (a function of a pytree of tensors) by running it once on `example`, and return a step that replays
   * it without the op layer (WebGPU's `recordStep`, as a CUDA graph). Absent where a backend records nothing: the
   * host backends, and WebGPU with `recordSteps: false`. The trainer records its warm-start step where it can.
   */
  readonly record?: <I, O>(fn: (inputs: I) => O, example: I) => RecordedStep<I, O>;
}

/** A function of tensors recorded once and replayed (`Backend.record`; WebGPU's `recordStep` says what it keeps). */
export interface RecordedStep<I, O> {
  /** The recorded function's outputs for `inputs` (same structure, shapes and dtypes as at recording). */
  run(inputs: I): O;
  /** Dispatches one run encodes. */
  readonly dispatches: number;
  /** Let go of what it holds; a later `run` throws. */
  dispose(): void;
}

const readBack = new WeakMap<Backend, number>();

/**
 * Called by a backend's `read` and `readSync` with the bytes each copies to the host: what a sampler that picks
 * tokens on the device saves. Tensors read by kernels in place are not reads.
 */
export function countReadBack(backend: Backend, bytes: number): void {
  readBack.set(backend, (readBack.get(backend) ?? 0) + bytes);
}

/** Bytes this backend instance has copied to the host through `read`/`readSync` since it was made (or reset). */
export function readBackBytes(backend: Backend): number {
  return readBack.get(backend) ?? 0;
}

export function resetReadBackBytes(backend: Backend): void {
  readBack.delete(backend);
}

/**
 * The most threads a CPU backend starts (`threads`, `--threads`, `RLVR_THREADS`). Each is a worker with its own
 * stack and WebAssembly instance, so a mistyped count (1e9) would spawn workers until memory ran out; 256 is more
 * than the cores of any machine this runs on (the kernels split work per thread, so more threads than cores only
 * add wake-ups), and a fixed bound keeps a setting's validity the same on every machine.
 */
export const MAX_THREADS = 256;
