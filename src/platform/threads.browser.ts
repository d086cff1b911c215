import type * as Node from './threads.js';
import { NodeOnlyError } from './errors.js';

/** A page's threads (types: threads.ts's): Web Workers, sharing memory only where the page is cross-origin isolated. */
interface PageWorker {
  postMessage(data: unknown): void;
  terminate(): void;
}
interface PageGlobals {
  readonly navigator?: { readonly hardwareConcurrency?: number };
  readonly crossOriginIsolated?: boolean;
  readonly document?: unknown;
  readonly Worker: new (url: string) => PageWorker;
}
const page = globalThis as unknown as PageGlobals;

export const hardwareThreads: typeof Node.hardwareThreads = () => page.navigator?.hardwareConcurrency ?? 1;

export const canShareMemory: typeof Node.canShareMemory = () =>
  page.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined';

// A page's main thread may not block; a worker may.
export const addressSpaceLimit: typeof Node.addressSpaceLimit = () => null;
export const addressSpaceUsed: typeof Node.addressSpaceUsed = () => null;

export const canBlock: typeof Node.canBlock = () => page.document === undefined;

export const spawnThread: typeof Node.spawnThread = (main, data) => {
  const source = `self.onmessage = (e) => { self.onmessage = null; (${main.toString()})(e.data); };`;
  const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  const worker = new page.Worker(url);
  worker.postMessage(data);
  URL.revokeObjectURL(url);
  return { terminate: () => worker.terminate() };
};

export const spawnMessageThread: typeof Node.spawnMessageThread = () => {
  throw new NodeOnlyError('spawnMessageThread');
};
