import { countReadBack, MAX_THREADS, type KernelTensor, type MemoryInfo, type Storage } from '../../core/backend.js';
import { isHalf, type DType, type HostArray, type TypedArray } from '../../core/dtype.js';
import { BackendError } from '../../core/errors.js';
import { canShareMemory, hardwareThreads } from '../../platform/threads.js';
import { checkKernelDType, readHost, type HostBackend } from '../reference/host.js';
// The reference kernels this backend falls back to (registered for 'reference' when that module loads).
import '../reference/index.js';
import {
  loadKernels,
  MEMORY64_MAX_BYTES,
  runtimeHasMemory64,
  runtimeHasRelaxedSimd,
  useMemory64,
} from './kernels-module.js';
import { UNSHARED_BYTES, WasmRuntime } from './runtime.js';
import type { WasmHost } from './wasm-kernels.js';
import { registerCpuKernels } from './registrations.js';

export interface CpuOptions {
  /**
   * Threads for the kernels, 1..MAX_THREADS (default: `RLVR_THREADS`, else the machine's cores). 1 runs on the
   * calling thread.
   */
  readonly threads?: number;
  /**
   * Work (flops, or elements x 8) below which a kernel runs on the calling thread alone (default 2^20): waking a
   * thread costs microseconds, a decode step's [16, 64] x [64, 192] product about 20. Results do not depend on it.
   */
  readonly minParallelWork?: number;
  /**
   * Work from which a split call wakes a worker that sleeps (default 2^23, about 170 us of one thread's GEMM): a
   * smaller one is shared only with a worker still polling for work, else its calling thread runs every part.
   * Waking a thread cost the calling thread about 25 us, and the worker started 40-50 us late, on the 2-core
   * machine the main job is timed on: more than half of a smaller call. Results do not depend on it.
   */
  readonly minWakeWork?: number;
  /**
   * Share the memory with worker threads (default: where the host can, i.e. Node, or a cross-origin isolated page).
   * Without it the kernels run on one thread in an ordinary memory of a fixed 1 GiB.
   */
  readonly sharedMemory?: boolean;
  /**
   * Hold at most this many bytes (default: all the WebAssembly memory can: 4 GiB shared, 1 GiB otherwise), as a
   * smaller device would: a run's memory estimate is checked against it, and an allocation past it fails as running
   * out of memory does.
   */
  readonly memoryLimitBytes?: number;
  /**
   * Use the kernels built with relaxed SIMD's fused multiply-add (`f32x4.relaxed_madd`: up to 1.7x the plain
   * build's multiply-add throughput): `true` requires it, `false` forces the plain 128-bit SIMD kernels, whose
   * results are the same on every machine (a fused multiply-add rounds once, and whether the processor fuses is
   * its own). Default: `RLVR_CPU_FMA` (`on`, `off`, `auto`), else where the runtime has relaxed SIMD.
   */
  readonly fma?: boolean;
  /**
   * Use the kernels built for a 64-bit memory (memory64: up to 16 GiB, V8's limit; Node >= 24, Chrome >= 133), whose
   * addresses cost i64 arithmetic: `true` requires it, `false` keeps the 32-bit memory (4 GiB). Default: the 32-bit
   * one, until a run's memory estimate exceeds it (`reserveFor`, which `train` calls before allocating anything).
   */
  readonly memory64?: boolean;
}

export { MAX_THREADS, runtimeHasMemory64, runtimeHasRelaxedSimd };

/** A 32-bit WebAssembly memory's limit, and where the heap starts in it (below: the kernels' data, the job slot). */
const WASM32_BYTES = 4 * 1024 ** 3;
const KERNEL_DATA_BYTES = 1 << 21;

/** Whether a CPU backend uses the fused multiply-add kernels by default: `RLVR_CPU_FMA`, else where it can. */
export function defaultFma(): boolean {
  const env = globalThis.process?.env?.RLVR_CPU_FMA;
  if (env === undefined || env === '' || env === 'auto') return runtimeHasRelaxedSimd();
  if (env === 'off') return false;
  if (env === 'on') return true;
  throw new BackendError('cpu', `RLVR_CPU_FMA must be on, off or auto, got '${env}'`);
}

/** The thread count a CPU backend takes by default: `RLVR_THREADS` if set, else the machine's cores. */
export function defaultThreads(): number {
  const env = globalThis.process?.env?.RLVR_THREADS;
  if (env !== undefined && env !== '') {
    // Decimal digits only: `Number` reads 0x10 as 16 and ' 4 ' as 4.
    const n = /^\d+$/.test(env) ? Number(env) : Number.NaN;
    if (!Number.isInteger(n) || n < 1 || n > MAX_THREADS)
      throw new BackendError('cpu', `RLVR_THREADS must be a whole number in 1..${MAX_THREADS}, got '${env}'`);
    return n;
  }
  return Math.max(1, hardwareThreads());
}

const CONSTRUCTORS = {
  f32: Float32Array,
  f64: Float64Array,
  i32: Int32Array,
  bf16: Uint16Array,
  f16: Uint16Array,
} as const;

/**
 * The CPU backend, the default one: WebAssembly kernels with 128-bit SIMD (`assembly/`) on `threads` threads that
 * share one WebAssembly.Memory, for f32 (matmul, attention, the fused norm/SwiGLU/RoPE/log-prob kernels, AdamW and
 * the common elementwise ops). Every other kernel and dtype (f64, i32 arithmetic, indexing, movement) is the
 * reference backend's, run on this backend's storage and counted (`fallbackCounts(backend)`).
 *
 * Storage is a typed-array view into the shared memory, carved from the runtime's pool, so a steady training step
 * allocates nothing new. Every kernel does a fixed part of its output per thread and sums in a fixed order, so
 * results are the same from run to run and for every thread count.
 */
export class CpuBackend implements HostBackend, WasmHost {
  readonly name = 'cpu';
  readonly synchronous = true;
  readonly fallbackKernels = 'reference';
  // Each kernel computes an output row the same way whatever the batch's shape (fixed K blocking, per-row loops).
  readonly batchInvariant = true;
  readonly minParallelWork: number;
  readonly minWakeWork: number;
  /**
   * What the heap may hold: a shared 32-bit WebAssembly memory at most 4 GiB, a memory64 16 GiB (less the first
   * 2 MiB, the kernels' data), an unshared one 1 GiB; less where `memoryLimitBytes` or the address space says.
   */
  maxMemoryBytes = 0;
  /** What limits `maxMemoryBytes`, for a refusal: the build's memory and its limit, and why not a larger one. */
  memoryNote = '';
  /** Where memory64 would hold more than this runtime lets the backend have: for a refusal's "what would fit". */
  largerMemory: { readonly bytes: number; readonly how: string } | undefined;
  /** Whether the kernels are the relaxed-SIMD build (fused multiply-add) rather than the plain one. */
  readonly fma: boolean;
  private runtime!: WasmRuntime;
  private readonly shared: boolean;
  private readonly threadsAsked: number;
  private readonly limitBytes: number;
  private readonly memory64Asked: boolean | undefined;
  /** Why a run's estimate past the 32-bit memory did not take memory64, once one did not (for `memoryNote`). */
  private withoutMemory64: 'runtime' | 'off' | 'late' | null = null;
  private buffers = 0;
  private bytes = 0;
  private peakBytes = 0;
  private scratchPtr = 0;
  private scratchStride = 0;

  constructor(opts: CpuOptions = {}) {
    const threads = opts.threads ?? defaultThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_THREADS)
      throw new BackendError('cpu', `threads must be a whole number in 1..${MAX_THREADS}, got ${threads}`);
    this.minParallelWork = opts.minParallelWork ?? 1 << 20;
    this.minWakeWork = opts.minWakeWork ?? 1 << 23;
    this.shared = opts.sharedMemory ?? canShareMemory();
    this.threadsAsked = threads;
    this.limitBytes = opts.memoryLimitBytes ?? Number.POSITIVE_INFINITY;
    this.memory64Asked = opts.memory64;
    this.fma = opts.fma ?? defaultFma();
    if (this.fma && !runtimeHasRelaxedSimd())
      throw new BackendError(
        'cpu',
        `the fused multiply-add kernels need WebAssembly relaxed SIMD, which this runtime lacks (Node >= 22 has it); RLVR_CPU_FMA=off or { fma: false } runs the plain ones`,
      );
    if (opts.memory64 === true && !(this.shared && runtimeHasMemory64()))
      throw new BackendError(
        'cpu',
        this.shared
          ? 'the memory64 kernels need WebAssembly memory64, which this runtime lacks (Node >= 24 has it)'
          : 'the memory64 kernels need a shared memory (threads), which this host cannot share',
      );
    this.open(opts.memory64 === true);
  }

  /** The kernels' runtime: its memory, threads and pool (replaced once where `reserveFor` takes memory64). */
  get rt(): WasmRuntime {
    return this.runtime;
  }

  /** Whether the kernels address a 64-bit memory (memory64) rather than a 32-bit one. */
  get memory64(): boolean {
    return this.runtime.memory64;
  }

  private open(memory64: boolean): void {
    const kernels = loadKernels({ shared: this.shared, fma: this.fma, memory64 });
    const whole = (memory64 ? MEMORY64_MAX_BYTES : this.shared ? WASM32_BYTES : UNSHARED_BYTES) - KERNEL_DATA_BYTES;
    const asked = Math.min(whole, this.limitBytes);
    const pages64 = MEMORY64_MAX_BYTES / 65536;
    this.runtime = new WasmRuntime(kernels, this.threadsAsked, asked + KERNEL_DATA_BYTES, pages64);
    this.maxMemoryBytes = Math.min(asked, this.runtime.limitBytes - KERNEL_DATA_BYTES);
    this.describeLimit(whole);
  }

  /** `memoryNote` and `largerMemory` for the memory now open, whose build holds `whole` bytes at most. */
  private describeLimit(whole: number): void {
    const gib = (b: number): string => `${+(b / 1024 ** 3).toFixed(2)} GiB`;
    const memory64 = this.runtime.memory64;
    this.largerMemory = undefined;
    if (this.maxMemoryBytes >= this.limitBytes) this.memoryNote = "the cpu backend's memoryLimitBytes";
    else if (this.maxMemoryBytes < whole)
      this.memoryNote = `the cpu backend's WebAssembly ${memory64 ? 'memory64' : 'memory'}: ${gib(this.runtime.limitBytes)}, what the address-space limit (ulimit -v) let it reserve`;
    else if (memory64)
      this.memoryNote = "the cpu backend's WebAssembly memory64: 16 GiB at most, V8's limit for one memory";
    else if (!this.shared)
      this.memoryNote =
        "the cpu backend's WebAssembly memory: 1 GiB where threads cannot share it (a page without cross-origin isolation)";
    else {
      const reasons = {
        runtime: 'this runtime has no memory64, which holds up to 16 GiB (Node >= 24, Chrome >= 133)',
        off: 'memory64 (up to 16 GiB) was turned off ({ memory64: false })',
        late: 'it held tensors before the run was estimated, too late to take memory64 (up to 16 GiB): open the backend with { memory64: true }',
      };
      const why = this.withoutMemory64 === null ? null : reasons[this.withoutMemory64];
      this.memoryNote = `the cpu backend's WebAssembly memory: 4 GiB at most, one 32-bit memory${why ? `; ${why}` : ''}`;
      if (this.withoutMemory64 === 'runtime')
        this.largerMemory = {
          bytes: MEMORY64_MAX_BYTES,
          how: 'Node >= 24, whose WebAssembly memory64 holds up to 16 GiB',
        };
    }
  }

  /**
   * Make room for a run estimated at `bytes`, before it allocates anything: where the estimate exceeds the 32-bit
   * memory and memory64 would hold more (`useMemory64`), the backend replaces its runtime with the memory64 build's
   * (new workers, an empty pool). A backend already holding tensors keeps its memory, and its `memoryNote` says why.
   * `maxMemoryBytes` and `memoryNote` then describe the memory in use, for the run's check against the estimate.
   */
  reserveFor(bytes: number): void {
    if (this.runtime.memory64) return;
    const past = bytes > this.maxMemoryBytes;
    // Asked only of a run past the 32-bit memory: the probe reserves a memory64's address space.
    const hasMemory64 = past && this.shared && this.memory64Asked !== false && runtimeHasMemory64();
    const choice = { estimateBytes: bytes, wasm32Bytes: this.maxMemoryBytes, limitBytes: this.limitBytes };
    const take = useMemory64({ ...choice, shared: this.shared, hasMemory64, requested: this.memory64Asked });
    const wasm32 = (this.shared ? WASM32_BYTES : UNSHARED_BYTES) - KERNEL_DATA_BYTES;
    if (!take || this.buffers > 0) {
      if (past && this.shared && this.limitBytes > this.maxMemoryBytes)
        this.withoutMemory64 = this.memory64Asked === false ? 'off' : !hasMemory64 ? 'runtime' : 'late';
      this.describeLimit(wasm32);
      return;
    }
    // The new runtime first: where it cannot be made (the address space), the backend keeps the one it has.
    const old = this.runtime;
    this.open(true);
    old.dispose();
    this.scratchPtr = 0;
    this.scratchStride = 0;
  }

  get threads(): number {
    return this.rt.threads;
  }

  /**
   * Resolves once the worker threads have started. Kernels called before run on the calling thread alone (with the
   * same results); await this where the threads must be used from the first call (benchmarks, specs).
   */
  whenReady(): Promise<void> {
    return this.rt.whenReady();
  }

  describe(): string {
    const t = this.rt.threads;
    const simd = this.fma ? 'relaxed SIMD (fused multiply-add)' : 'SIMD';
    const memory = this.rt.memory64 ? ', memory64' : '';
    return `cpu (WebAssembly ${simd} kernels${memory}, ${t} thread${t === 1 ? '' : 's'}; f64 and other kernels: reference)`;
  }

  supportsDType(): boolean {
    return true;
  }

  /** Zero-filled, as the reference kernels expect. */
  alloc(dtype: DType, size: number): TypedArray {
    const a = this.allocRaw(dtype, size);
    a.fill(0);
    return a;
  }

  /** Uninitialised: for kernels that write every entry. */
  allocRaw(dtype: DType, size: number): TypedArray {
    checkKernelDType('cpu', dtype);
    return this.carve(dtype, size) as TypedArray;
  }

  /** An array of `size` elements of `dtype` in the WebAssembly memory, counted (bf16/f16: 16-bit words). */
  private carve(dtype: DType, size: number): HostArray {
    const bytes = size * CONSTRUCTORS[dtype].BYTES_PER_ELEMENT;
    let ptr: number;
    try {
      ptr = this.rt.alloc(bytes);
    } catch (e) {
      if (e instanceof RangeError)
        throw new BackendError(
          'cpu',
          `out of memory: ${bytes} more bytes do not fit in ${this.maxMemoryBytes} bytes (${this.memoryNote})`,
        );
      throw e;
    }
    this.buffers++;
    this.bytes += bytes;
    this.peakBytes = Math.max(this.peakBytes, this.bytes);
    return new CONSTRUCTORS[dtype](this.rt.buffer, ptr, size);
  }

  launch(name: string, args: readonly number[], work: number): void {
    this.rt.run(name, args, work >= this.minParallelWork, work >= this.minWakeWork);
  }

  scratch(bytesPerThread: number): { readonly ptr: number; readonly stride: number } {
    if (bytesPerThread > this.scratchStride) {
      if (this.scratchStride > 0) this.rt.release(this.scratchPtr, this.scratchStride * this.rt.threads);
      const stride = Math.ceil(bytesPerThread / 64) * 64;
      this.scratchPtr = this.rt.alloc(stride * this.rt.threads);
      this.scratchStride = stride;
    }
    return { ptr: this.scratchPtr, stride: this.scratchStride };
  }

  /** Give a temporary of `allocRaw` back at once. */
  release(a: TypedArray): void {
    this.free(a as unknown as Storage);
  }

  upload(values: HostArray, dtype: DType): Storage {
    const a = isHalf(dtype) ? this.carve(dtype, values.length) : this.allocRaw(dtype, values.length);
    a.set(values);
    return a as unknown as Storage;
  }

  read(x: KernelTensor): Promise<TypedArray> {
    return Promise.resolve(this.readSync(x));
  }

  /** A copy in the JavaScript heap (never a view of the shared memory). */
  readSync(x: KernelTensor): TypedArray {
    const out = readHost(x, x.storage as unknown as HostArray);
    countReadBack(this, out.byteLength);
    return out;
  }

  free(storage: Storage): void {
    const v = storage as unknown as TypedArray;
    this.buffers--;
    this.bytes -= v.byteLength;
    this.rt.release(v.byteOffset, v.byteLength);
  }

  memory(): MemoryInfo {
    return { buffers: this.buffers, bytes: this.bytes };
  }

  /** The most bytes the tensors held at once since the last `resetPeakMemory` (or since the backend opened). */
  peakMemoryBytes(): number {
    return this.peakBytes;
  }

  /**
   * Start counting `peakMemoryBytes()`, the most bytes the tensors held at once, from what they hold now: a spec or
   * a benchmark measures one step's peak with it (the pool's heap only ever grows, and rounds sizes up).
   */
  resetPeakMemory(): void {
    this.peakBytes = this.bytes;
  }

  /** The pool inside the WebAssembly memory: blocks carved fresh vs reused, the heap's size. */
  poolStats(): ReturnType<WasmRuntime['stats']> {
    return this.rt.stats();
  }

  /**
   * Stop the worker threads. Tensors already made keep working (their memory stays), with kernels on the calling
   * thread alone; `openBackend('cpu')` then makes a new backend.
   */
  dispose(): void {
    this.rt.dispose();
  }

  get disposed(): boolean {
    return this.rt.isDisposed;
  }
}

registerCpuKernels();
