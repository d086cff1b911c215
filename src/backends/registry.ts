import type { Backend } from '../core/backend.js';
import { setDefaultBackendFactory } from '../core/runtime.js';
import { CpuBackend, defaultThreads } from './cpu/index.js';
import { ReferenceBackend } from './reference/index.js';

/**
 * Every backend by name: the one list the CLI (flag values, usage text), the trainer (`TrainConfig.backend`,
 * validated and opened by `train`) and `openBackend` read. Adding a backend is its folder (the class and its kernel
 * registrations, `core/kernels.ts`) plus one line here.
 */
export interface OpenOptions {
  /** The CPU backend's threads (default `RLVR_THREADS`, else the machine's cores). */
  readonly threads?: number;
}

export interface BackendEntry {
  /** Shown in usage texts. */
  readonly help: string;
  /**
   * A backend ready to use (async: a device may have to be acquired). `dispose()` it when done. `threads` sets the
   * CPU backend's thread count (others ignore it).
   */
  readonly open: (opts?: OpenOptions) => Promise<Backend>;
}

// One CPU backend per process and thread count: the default one (RLVR_THREADS or the machine's cores) is also the
// default backend, so tensors made without naming a backend and parameters opened by name live on the same one.
// One reference backend too (nothing to release).
const cpuByThreads = new Map<number, CpuBackend>();
const cpu = (threads: number = defaultThreads()): CpuBackend => {
  let b = cpuByThreads.get(threads);
  if (b === undefined || b.disposed) {
    b = new CpuBackend({ threads });
    cpuByThreads.set(threads, b);
  }
  return b;
};
let sharedReference: ReferenceBackend | null = null;

export const BACKENDS = {
  cpu: {
    help: 'the default: WebAssembly SIMD kernels on worker threads (f32; f64 through the reference kernels)',
    open: async (opts?: OpenOptions) => cpu(opts?.threads),
  },
  reference: {
    help: 'TypeScript reference kernels, one thread (f32 and f64)',
    open: async () => (sharedReference ??= new ReferenceBackend()),
  },
  // Loaded on demand: a CPU-only run never loads Dawn or the shaders.
  webgpu: {
    help: 'WGSL kernels through Dawn (needs a WebGPU adapter)',
    open: async () => (await import('./webgpu/index.js')).createWebGpuBackend(),
  },
} as const satisfies Readonly<Record<string, BackendEntry>>;

export type BackendName = keyof typeof BACKENDS;
export const BACKEND_NAMES = Object.keys(BACKENDS) as BackendName[];
export const isBackendName = (name: string): name is BackendName => Object.hasOwn(BACKENDS, name);

setDefaultBackendFactory(() => cpu());

/**
 * The backend a run asked for by name. WebGPU without an adapter rejects with a typed `NoAdapterError` that says
 * what to install; a caller that prefers to go on may catch it and use the CPU backend. Dispose the backend when
 * done (Dawn keeps the process alive while a device lives; the CPU backend's `dispose` does nothing).
 */
export async function openBackend(name: BackendName, opts?: OpenOptions): Promise<Backend> {
  return BACKENDS[name].open(opts);
}
