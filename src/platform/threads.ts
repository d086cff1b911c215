import { readFileSync } from 'node:fs';
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

/**
 * This process's address-space limit in bytes (`ulimit -v`, Linux's "Max address space" in /proc/self/limits), or
 * null where there is none or it cannot be read: what a WebAssembly memory's reservation must fit in.
 */
export function addressSpaceLimit(): number | null {
  return procField('/proc/self/limits', 'Max address space', 1);
}

/** The address space this process has mapped in bytes (VmSize in /proc/self/status), or null where unknown. */
export function addressSpaceUsed(): number | null {
  return procField('/proc/self/status', 'VmSize:', 1024);
}

/** The first number after `label` on its line of a /proc file, times `unit`; null where absent or unreadable. */
function procField(path: string, label: string, unit: number): number | null {
  try {
    const line = readFileSync(path, 'utf8')
      .split('\n')
      .find((l) => l.startsWith(label));
    const value = line?.slice(label.length).trim().split(/\s+/)[0];
    return value !== undefined && /^\d+$/.test(value) ? Number(value) * unit : null;
  } catch {
    return null;
  }
}

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

/** A thread that answers messages: `postMessage`, listeners for its replies and errors, and `terminate`. */
export interface MessageThread {
  postMessage(message: unknown): void;
  on(event: 'message' | 'error', listener: (value: unknown) => void): void;
  off(event: 'message' | 'error', listener: (value: unknown) => void): void;
  terminate(): Promise<unknown>;
}

/**
 * A thread running `source` (CommonJS text: `require('node:worker_threads')` gives it `parentPort` and
 * `workerData`), which the caller can terminate: the way to bound work that cannot be interrupted from inside
 * (a regular expression that backtracks). Node only: a page's twin throws `NodeOnlyError`.
 */
export function spawnMessageThread(source: string, workerData: unknown): MessageThread {
  return new Worker(source, { eval: true, workerData }) as unknown as MessageThread;
}
