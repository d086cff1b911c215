import { BackendError } from '../../core/errors.js';
import { addressSpaceLimit, addressSpaceUsed, canBlock, spawnThread, type HostThread } from '../../platform/threads.js';
import type { LoadedKernels } from './kernels-module.js';

/**
 * The CPU backend's engine: one WebAssembly.Memory shared by the calling thread and `threads - 1` workers, each
 * running the same kernels module (`assembly/`), a pool allocator inside that memory, and a job slot through which
 * the calling thread hands a kernel call to every worker and does its own share (thread 0).
 *
 * A kernel export takes its arguments and then (part, parts), and does a fixed part of the work chosen from those
 * two alone, so a result is the same from run to run; the kernels make it the same for every thread count too. A
 * shared call is cut into `threads` parts that the threads claim one at a time (a counter in the job slot), the
 * calling thread first: a part is the same work whichever thread runs it (part p uses scratch slot p), and the
 * calling thread runs the parts no worker has claimed yet instead of waiting for a worker that is asleep or
 * descheduled (a 2-core machine shared with other jobs: waiting for the workers was 46% of the main job's time).
 * Arguments travel as numbers (an f64 holds any address up to 2^53); a memory64 build's kernels take addresses as
 * i64, which each thread passes as BigInt, at the positions the build lists (`LoadedKernels.i64Args`).
 */

const PAGE = 65536;
/** The kernels' static data (math tables) lies below this; the job slot just under the heap. */
const CONTROL = 1 << 20;
const HEAP_START = CONTROL + 4096;
const MAX_ARGS = 32;
// Control words (Int32 at CONTROL): the job's sequence number, parts done, kernel index, argument count, parts,
// stop, workers started, the next part to claim, parts the workers ran (all jobs).
const SEQ = 0;
const DONE = 1;
const KERNEL = 2;
const NARGS = 3;
const NPARTS = 4;
const STOP = 5;
const READY = 6;
const NEXT = 7;
const WORKER_PARTS = 8;
const ARGS_OFFSET = 64;
/** The fixed size of an ordinary (unshared) memory: a page that is not cross-origin isolated. */
export const UNSHARED_BYTES = 1024 ** 3;
/**
 * A worker polls this many times for the next job before it sleeps (OpenMP's active wait, bounded): about 40 us in
 * Node 26 on the 2-core EPYC (a poll of a shared Int32Array takes about 18 ns), which covers the gap between the
 * kernels of a forward or backward pass. 100,000 (1.8 ms) kept the worker spinning through the whole main job: on
 * a machine shared with other jobs that spin took the cores the kernels needed (CPU time 35-44 s against 26-27 s,
 * wall time up to twice as long), and a part nobody has claimed runs on the calling thread anyway.
 */
const SPIN = 2_000;

interface WorkerData {
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  readonly names: readonly string[];
  readonly i64Args: readonly (readonly number[])[];
  readonly workers: number;
  readonly control: number;
  readonly spin: number;
}

/** A worker's loop; sent to the thread as source text, so it refers to nothing outside itself. */
function workerMain(d: WorkerData): void {
  const instance = new WebAssembly.Instance(d.module, { env: { memory: d.memory } });
  const fns = d.names.map((n) => instance.exports[n] as (...args: (number | bigint)[]) => void);
  const ctl = new Int32Array(d.memory.buffer, d.control, 16);
  const args = new Float64Array(d.memory.buffer, d.control + 64, 32);
  let seen = Atomics.load(ctl, 0);
  Atomics.add(ctl, 6, 1);
  for (;;) {
    let spins = 0;
    while (Atomics.load(ctl, 0) === seen) {
      if (++spins > d.spin) {
        Atomics.wait(ctl, 0, seen);
        spins = 0;
      }
    }
    seen = Atomics.load(ctl, 0);
    if (Atomics.load(ctl, 5) !== 0) return;
    // Claim parts until none is left. A claimed part's job stays posted until its part is done (the caller waits
    // for every part), so the job is read after the claim; a claim that comes too late finds the counter spent.
    for (let part = Atomics.add(ctl, 7, 1); part < d.workers + 1; part = Atomics.add(ctl, 7, 1)) {
      const n = ctl[4]!;
      const a: (number | bigint)[] = [];
      for (let i = 0; i < ctl[3]!; i++) a.push(args[i]!);
      for (const i of d.i64Args[ctl[2]!]!) a[i] = BigInt(a[i]!);
      a.push(part, n);
      fns[ctl[2]!]!(...a);
      Atomics.add(ctl, 8, 1);
      if (Atomics.add(ctl, 1, 1) + 1 === n) Atomics.notify(ctl, 1);
    }
  }
}

/** Pool size classes: 64-byte steps up to 4 KiB, then eighths of an octave (at most 12.5% unused). */
export function sizeClass(bytes: number): number {
  const b = Math.max(64, bytes);
  if (b <= 4096) return Math.ceil(b / 64) * 64;
  const step = 2 ** (Math.floor(Math.log2(b)) - 3);
  return Math.ceil(b / step) * step;
}

export interface PoolStats {
  /** Kernel calls split among the threads (the others ran on the calling thread alone). */
  readonly parallelRuns: number;
  /**
   * Parts of those calls the worker threads ran, and the calling thread ran (`parallelRuns` x threads in all): the
   * calling thread runs a part no worker has claimed yet rather than wait for one asleep or descheduled.
   */
  readonly workerParts: number;
  readonly callerParts: number;
  /** Blocks handed out and not yet returned, and their bytes (size classes). */
  readonly liveBlocks: number;
  readonly liveBytes: number;
  /** Bytes of the heap ever carved (the pool never shrinks), and how many blocks were carved fresh vs reused. */
  readonly heapBytes: number;
  readonly carved: number;
  readonly reused: number;
}

/** The maximum (pages) each memory `reserveMemory` made was created with (a WebAssembly.Memory does not say). */
const memoryMaximum = new WeakMap<WebAssembly.Memory, number>();

/** The smallest maximum `reserveMemory` tries before giving up: 256 MiB. */
const MIN_MAXIMUM_PAGES = 4096;

/**
 * A WebAssembly.Memory of `initial` pages that may grow to `maximum` (a shared one reserves its maximum's address
 * space up front), 64-bit where `memory64`. Under an address-space limit (`ulimit -v`) the reservation fails with a
 * RangeError ("could not allocate memory"): the maximum is halved, never below what `limitBytes` or
 * `MIN_MAXIMUM_PAGES` asks, until one fits. V8 also reserves guard regions, where it traps out-of-bounds accesses
 * with signals, whatever the maximum (measured on Node 26: 8 GiB of address space for a 32-bit memory, 16 GiB for a
 * memory64), which a smaller maximum does not shrink: when none fits, a `MemoryReservationError` says what was
 * needed, the limit, and how to run.
 */
export function reserveMemory(
  initial: number,
  maximum: number,
  shared: boolean,
  limitBytes = Number.POSITIVE_INFINITY,
  memory64 = false,
): WebAssembly.Memory {
  const floor = Math.max(initial, Math.min(maximum, MIN_MAXIMUM_PAGES, Math.ceil(limitBytes / PAGE)));
  for (let max = maximum; ; max = Math.max(floor, Math.floor(max / 2))) {
    // A 64-bit memory's sizes are BigInt (the JavaScript API's memory64 extension, which TypeScript lacks).
    const descriptor = memory64
      ? { address: 'i64', initial: BigInt(initial), maximum: BigInt(max), shared }
      : { initial, maximum: max, shared };
    try {
      const memory = new WebAssembly.Memory(descriptor as unknown as WebAssembly.MemoryDescriptor);
      memoryMaximum.set(memory, max);
      return memory;
    } catch (e) {
      if (!(e instanceof RangeError)) throw e;
      if (max <= floor) throw new MemoryReservationError(maximum * PAGE, addressSpaceLimit(), memory64);
    }
  }
}

/** Address space a worker thread takes (its isolate's code range and heap; measured 0.1-0.8 GiB each, Node 20). */
const WORKER_ADDRESS_BYTES = 1024 ** 3;
/** Address space kept for the calling thread's own growth (its heap, buffers) after the memory is reserved. */
const SPARE_ADDRESS_BYTES = 256 * 1024 ** 2;

/**
 * At most `threads`, fewer where the address-space limit (`ulimit -v`) leaves too little room for the workers: a
 * worker that cannot reserve its isolate's code range ends the process (a V8 fatal error, no exception). Fewer
 * threads give the same results (the kernels split work per thread), only slower.
 */
function threadsThatFit(threads: number): number {
  const limit = addressSpaceLimit();
  const used = addressSpaceUsed();
  if (limit === null || used === null) return threads;
  const room = Math.floor((limit - used - SPARE_ADDRESS_BYTES) / WORKER_ADDRESS_BYTES);
  return Math.max(1, Math.min(threads, 1 + room));
}

const gib = (bytes: number): string => `${+(bytes / 1024 ** 3).toFixed(2)} GiB`;

/** The CPU backend's memory could not be reserved: an address-space limit (`ulimit -v`) too low for it. */
export class MemoryReservationError extends BackendError {
  constructor(
    readonly wantedBytes: number,
    readonly addressSpaceLimit: number | null,
    readonly memory64 = false,
  ) {
    const limit = addressSpaceLimit === null ? '' : ` (ulimit -v: ${gib(addressSpaceLimit)})`;
    const [memory, guarded] = memory64 ? ['memory64', '16 GiB'] : ['memory', 'about 10 GiB'];
    super(
      'cpu',
      `cannot reserve its WebAssembly ${memory}: up to ${gib(wantedBytes)} plus the guard regions V8 reserves around ` +
        `it, ${guarded} of address space, more than the address-space limit${limit} leaves; raise the limit ` +
        '(ulimit -v unlimited) or run node with --disable-wasm-trap-handler (NODE_OPTIONS), which reserves no guard regions',
    );
  }
}

export class WasmRuntime {
  readonly memory: WebAssembly.Memory;
  readonly threads: number;
  /** Whether the memory is 64-bit (the kernels' memory64 build). */
  readonly memory64: boolean;
  private readonly fns: ((...args: number[]) => unknown)[];
  private readonly index = new Map<string, number>();
  private readonly ctl: Int32Array;
  private readonly args: Float64Array;
  private readonly workers: HostThread[] = [];
  private readonly free = new Map<number, number[]>();
  /** Blocks lent from a larger class than their request's, by address: they go back to that class. */
  private readonly lentClass = new Map<number, number>();
  /** The heap's end may not pass this (the memory's maximum, or a smaller limit the backend was given). */
  private readonly limit: number;
  /** The heap's end may not pass this many bytes (less than asked where the address space was short). */
  get limitBytes(): number {
    return this.limit;
  }
  private top = HEAP_START;
  private live = 0;
  private liveBytes = 0;
  private carved = 0;
  private reused = 0;
  private disposed = false;

  /**
   * `kernels` import a shared memory when their build is shared (then `threads` >= 1 threads), an ordinary one
   * otherwise (one thread, and a fixed size of `UNSHARED_BYTES`: growing an ordinary memory would detach every view
   * of it); a memory64 build's memory may grow to `maxPages64` pages.
   */
  constructor(kernels: LoadedKernels, threads: number, limitBytes = Number.POSITIVE_INFINITY, maxPages64 = 0) {
    const { module, names, i64Args, build } = kernels;
    const shared = build.shared;
    this.memory64 = build.memory64;
    const pages = shared ? Math.ceil(HEAP_START / PAGE) + 16 : UNSHARED_BYTES / PAGE;
    const maximum = this.memory64 ? maxPages64 : shared ? 65536 : pages;
    this.memory = reserveMemory(pages, maximum, shared, limitBytes, this.memory64);
    this.threads = shared ? threadsThatFit(threads) : 1;
    this.limit = Math.min(limitBytes, memoryMaximum.get(this.memory)! * PAGE);
    const instance = new WebAssembly.Instance(module, { env: { memory: this.memory } });
    this.fns = names.map((n, i) => {
      this.index.set(n, i);
      const f = instance.exports[n];
      if (typeof f !== 'function') throw new Error(`the kernels module has no export ${n}`);
      const wide = i64Args[i]!;
      if (wide.length === 0) return f as (...args: number[]) => unknown;
      // Addresses as BigInt: one conversion per address per call, nothing against a kernel's microseconds.
      return (...args: number[]): unknown => {
        const a: (number | bigint)[] = args;
        for (const p of wide) a[p] = BigInt(a[p]!);
        return (f as (...args: (number | bigint)[]) => unknown)(...a);
      };
    });
    this.ctl = new Int32Array(this.memory.buffer, CONTROL, 16);
    this.args = new Float64Array(this.memory.buffer, CONTROL + ARGS_OFFSET, MAX_ARGS);
    for (let w = 1; w < this.threads; w++) {
      const data: WorkerData = {
        module,
        memory: this.memory,
        names,
        i64Args,
        workers: this.threads - 1,
        control: CONTROL,
        spin: SPIN,
      };
      this.workers.push(spawnThread(workerMain, data));
    }
  }

  /** Call an export on this thread only (a kernel that returns a value, or work too small to share). */
  call(name: string, args: readonly number[]): number {
    return this.fns[this.kernelIndex(name)]!(...args, 0, 1) as number;
  }

  private kernelIndex(name: string): number {
    const k = this.index.get(name);
    if (k === undefined) throw new Error(`the kernels module has no export ${name}`);
    return k;
  }

  /**
   * Run kernel `name` split in parts among the threads, or on this one alone when `parallel` is false. Workers that
   * sleep are woken only when `wake`; a worker still polling for work takes parts either way.
   */
  run(name: string, args: readonly number[], parallel = true, wake = parallel): void {
    const k = this.kernelIndex(name);
    // Until every worker has started (a page cannot block while they do), and after dispose, the calling thread
    // does all the work: the results are the same.
    const n = parallel && !this.disposed && this.workersReady() ? this.threads : 1;
    if (n === 1) {
      this.fns[k]!(...args, 0, 1);
      return;
    }
    this.parallelRuns++;
    const ctl = this.ctl;
    for (let i = 0; i < args.length; i++) this.args[i] = args[i]!;
    ctl[KERNEL] = k;
    ctl[NARGS] = args.length;
    ctl[NPARTS] = n;
    Atomics.store(ctl, DONE, 0);
    // The job is posted once its parts can be claimed; the sequence number wakes the workers that sleep.
    Atomics.store(ctl, NEXT, 0);
    Atomics.add(ctl, SEQ, 1);
    if (wake) Atomics.notify(ctl, SEQ);
    const f = this.fns[k]!;
    for (let part = Atomics.add(ctl, NEXT, 1); part < n; part = Atomics.add(ctl, NEXT, 1)) {
      f(...args, part, n);
      this.callerParts++;
      Atomics.add(ctl, DONE, 1);
    }
    this.waitForParts(n);
  }

  private ready = false;
  private parallelRuns = 0;
  private callerParts = 0;

  /** Resolves once every worker has started (kernels run on the calling thread alone until then). */
  async whenReady(): Promise<void> {
    while (!this.disposed && !this.workersReady()) await new Promise((r) => setTimeout(r, 2));
  }

  private workersReady(): boolean {
    if (!this.ready) this.ready = Atomics.load(this.ctl, READY) === this.threads - 1;
    return this.ready;
  }

  /** Until the `parts` parts of the job are done: only parts a worker is running are left by now. */
  private waitForParts(parts: number): void {
    const ctl = this.ctl;
    let spins = 0;
    const block = canBlock();
    for (;;) {
      const done = Atomics.load(ctl, DONE);
      if (done === parts) return;
      if (block && ++spins > 2000) Atomics.wait(ctl, DONE, done, 1);
    }
  }

  /**
   * A 64-byte aligned block of at least `bytes` bytes from the pool: a free block of its size class, else the
   * smallest free block of a class at most twice as large, else new memory (grown when it must). Lending larger
   * blocks keeps the heap from growing with every size a tensor takes from step to step (a batch's completion
   * length varies): without it each new size class carves blocks of its own that no other size can use.
   */
  alloc(bytes: number): number {
    const cls = sizeClass(bytes);
    this.live++;
    const list = this.free.get(cls);
    if (list !== undefined && list.length > 0) {
      this.reused++;
      this.liveBytes += cls;
      return list.pop()!;
    }
    const lent = this.smallestFreeAbove(cls);
    if (lent !== null) {
      const ptr = this.free.get(lent)!.pop()!;
      this.lentClass.set(ptr, lent);
      this.reused++;
      this.liveBytes += lent;
      return ptr;
    }
    this.liveBytes += cls;
    const ptr = this.top;
    const end = ptr + cls;
    const have = this.memory.buffer.byteLength;
    if (end > this.limit) throw new RangeError(`the pool's limit of ${this.limit} bytes is reached`);
    if (end > have) {
      const pages = Math.ceil((end - have) / PAGE);
      // A 64-bit memory grows by a BigInt number of pages.
      this.memory.grow(this.memory64 ? (BigInt(pages) as unknown as number) : pages);
    }
    this.top = end;
    this.carved++;
    return ptr;
  }

  /** The smallest class in (cls, 2 cls] with a free block, or null. */
  private smallestFreeAbove(cls: number): number | null {
    let best: number | null = null;
    for (const [c, list] of this.free)
      if (c > cls && c <= 2 * cls && list.length > 0 && (best === null || c < best)) best = c;
    return best;
  }

  /** Return a block of `bytes` (as asked of `alloc`) at `ptr` to the pool. */
  release(ptr: number, bytes: number): void {
    const lent = this.lentClass.get(ptr);
    if (lent !== undefined) this.lentClass.delete(ptr);
    const cls = lent ?? sizeClass(bytes);
    this.live--;
    this.liveBytes -= cls;
    const list = this.free.get(cls);
    if (list === undefined) this.free.set(cls, [ptr]);
    else list.push(ptr);
  }

  /** The memory's current buffer (after a grow, views made from an older buffer stay valid: it is shared). */
  get buffer(): ArrayBuffer {
    // Typed arrays over a SharedArrayBuffer are typed as over an ArrayBuffer (same element access).
    return this.memory.buffer as ArrayBuffer;
  }

  stats(): PoolStats {
    return {
      parallelRuns: this.parallelRuns,
      workerParts: Atomics.load(this.ctl, WORKER_PARTS),
      callerParts: this.callerParts,
      liveBlocks: this.live,
      liveBytes: this.liveBytes,
      heapBytes: this.top - HEAP_START,
      carved: this.carved,
      reused: this.reused,
    };
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Stop the workers; kernels then run on the calling thread alone (their results do not change). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.workers.length > 0) {
      Atomics.store(this.ctl, STOP, 1);
      Atomics.add(this.ctl, SEQ, 1);
      Atomics.notify(this.ctl, SEQ);
      for (const w of this.workers) w.terminate();
    }
  }
}
