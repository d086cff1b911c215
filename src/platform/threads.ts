import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/**
 * Threads of the host (Node: `worker_threads`). The browser build replaces this file with `threads.browser.ts`
 * (same exports): Web Workers, and threads only where the page is cross-origin isolated.
 */

/** The cores this process may use (the default thread count of the CPU backend). */
export const hardwareThreads = (): number => availableParallelism();

/** Whether memory can be shared with other threads (SharedArrayBuffer, shared WebAssembly.Memory). */
export const canShareMemory = (): boolean => true;

/** Whether this thread may block in `Atomics.wait` (Node's main thread may; a page's main thread may not). */
export const canBlock = (): boolean => true;

export interface HostThread {
  terminate(): void;
}

/**
 * A thread running `main(data)`: `main` must be self-contained (it is sent as source text), and `data` is
 * structured-cloned (a WebAssembly.Module and a shared Memory travel by reference). The thread does not keep the
 * process alive.
 */
export function spawnThread<D>(main: (data: D) => void, data: D): HostThread {
  const source = `const { workerData } = require('node:worker_threads');\n(${main.toString()})(workerData);`;
  const worker = new Worker(source, { eval: true, workerData: data });
  worker.unref();
  return { terminate: () => void worker.terminate() };
}
