import sharedBase64 from './assembly/kernels.wasm';
import unsharedBase64 from './assembly/kernels-unshared.wasm';
import fmaSharedBase64 from './assembly/kernels-fma.wasm';
import fmaUnsharedBase64 from './assembly/kernels-fma-unshared.wasm';
import memory64Base64 from './assembly/kernels-memory64.wasm';
import fmaMemory64Base64 from './assembly/kernels-fma-memory64.wasm';
import { i64Params } from './wasm-signatures.js';

/**
 * One build of the kernels: for a shared memory (threads) or an ordinary one (a page that is not cross-origin
 * isolated); plain 128-bit SIMD, or relaxed SIMD, whose `f32x4.relaxed_madd` is WebAssembly's fused multiply-add;
 * a 32-bit memory (4 GiB at most), or a shared 64-bit one (memory64: up to `MEMORY64_MAX_BYTES`), whose kernels
 * take their addresses as i64.
 */
export interface KernelsBuild {
  readonly shared: boolean;
  readonly fma: boolean;
  readonly memory64: boolean;
}

/** The most a memory64 build's memory holds: 16 GiB, V8's limit for one memory64 (Node 24-26, Chrome). */
export const MEMORY64_MAX_BYTES = 16 * 1024 ** 3;

const BASE64 = {
  plain: { shared: sharedBase64, unshared: unsharedBase64, memory64: memory64Base64 },
  fma: { shared: fmaSharedBase64, unshared: fmaUnsharedBase64, memory64: fmaMemory64Base64 },
};

const bytesOf = (build: KernelsBuild): Uint8Array => {
  if (build.memory64 && !build.shared) throw new Error('the memory64 builds import a shared memory');
  const memory = build.memory64 ? 'memory64' : build.shared ? 'shared' : 'unshared';
  const bin = atob(BASE64[build.fma ? 'fma' : 'plain'][memory]);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
};

/** A compiled build, its exported functions, and the positions of each one's i64 (address) parameters. */
export interface LoadedKernels {
  readonly build: KernelsBuild;
  readonly module: WebAssembly.Module;
  readonly names: readonly string[];
  /** For each of `names`, the argument positions passed as BigInt (a memory64 build's addresses); else empty. */
  readonly i64Args: readonly (readonly number[])[];
}

const loaded = new Map<string, LoadedKernels>();

/** The kernels of a build: compiled once per process; a WebAssembly.Module is shareable with workers. */
export function loadKernels(build: KernelsBuild): LoadedKernels {
  const key = `${build.shared}/${build.fma}/${build.memory64}`;
  let k = loaded.get(key);
  if (k === undefined) {
    const bytes = bytesOf(build);
    const module = new WebAssembly.Module(bytes);
    const names = WebAssembly.Module.exports(module)
      .filter((e) => e.kind === 'function')
      .map((e) => e.name);
    const wide = i64Params(bytes);
    k = { build, module, names, i64Args: names.map((n) => wide.get(n) ?? []) };
    loaded.set(key, k);
  }
  return k;
}

let relaxedSimd: boolean | undefined;

/**
 * Whether this runtime compiles relaxed SIMD (Node >= 22, Chrome >= 114; Node 20 only behind a flag): the fma build
 * itself is what is validated, so the answer is exactly "can this module run here".
 */
export function runtimeHasRelaxedSimd(): boolean {
  if (relaxedSimd === undefined)
    relaxedSimd = WebAssembly.validate(bytesOf({ shared: false, fma: true, memory64: false }));
  return relaxedSimd;
}

let memory64: boolean | undefined;

/**
 * Whether this runtime runs the memory64 build (Node >= 24, Chrome >= 133): the build validates and instantiates on
 * a 64-bit memory. Validating is not enough: Node 22 compiles memory64 but its `WebAssembly.Memory` makes no 64-bit
 * memory (a TypeError). A memory64 reserves 16 GiB of address space however small (V8's guard regions), so this is
 * asked only of a run that needs more than 4 GiB; where the address space refuses it (a RangeError) the runtime has
 * memory64 all the same, and the backend's own reservation says what failed.
 */
export function runtimeHasMemory64(): boolean {
  if (memory64 === undefined) {
    const build = { shared: true, fma: false, memory64: true };
    memory64 = WebAssembly.validate(bytesOf(build));
    if (memory64) {
      try {
        const descriptor = { address: 'i64', initial: 32n, maximum: 32n, shared: true };
        const memory = new WebAssembly.Memory(descriptor as unknown as WebAssembly.MemoryDescriptor);
        new WebAssembly.Instance(loadKernels(build).module, { env: { memory } });
      } catch (e) {
        memory64 = e instanceof RangeError;
      }
    }
  }
  return memory64;
}

/** What decides whether a CPU backend takes the memory64 build. */
export interface AddressingChoice {
  /** The run's memory estimate (bytes), or 0 where none was made yet (a backend opened before its run). */
  readonly estimateBytes: number;
  /** What the 32-bit build holds here: its memory's limit, or less where `memoryLimitBytes` or the address space says. */
  readonly wasm32Bytes: number;
  /** The backend's `memoryLimitBytes` (Infinity where none was given): where it is what binds, memory64 holds no more. */
  readonly limitBytes: number;
  readonly shared: boolean;
  readonly hasMemory64: boolean;
  /** The backend's `memory64` option: true requires the build, false forbids it, undefined lets the estimate say. */
  readonly requested?: boolean;
}

/**
 * Whether to use the memory64 build: where asked, else only where the run's estimate exceeds what the 32-bit build
 * holds and memory64 could hold more (the runtime has it, the memory is shared, and `memoryLimitBytes` does not bind
 * first), since the 32-bit build is the faster. A run past even memory64's limit takes it too: its refusal then
 * names the larger limit and what would fit under it.
 */
export function useMemory64(c: AddressingChoice): boolean {
  if (c.requested !== undefined) return c.requested;
  return c.estimateBytes > c.wasm32Bytes && c.hasMemory64 && c.shared && c.limitBytes > c.wasm32Bytes;
}
