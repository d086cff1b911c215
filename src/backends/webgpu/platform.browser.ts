import { openDevice } from './adapter.js';
import type { AcquireOptions, DawnGlobals } from './device.js';
import { NoAdapterError, PAGE_ADVICE } from './errors.js';
import type * as Node from './platform.js';

/**
 * A page's (or a worker's) WebGPU: `navigator.gpu`. The browser build puts this file in place of `platform.ts`;
 * its exports have the same types (checked here against the Node file's).
 */
interface PageGlobals {
  readonly navigator?: { readonly gpu?: GPU };
  readonly GPUBufferUsage?: DawnGlobals['GPUBufferUsage'];
  readonly GPUMapMode?: DawnGlobals['GPUMapMode'];
}

export const acquireDevice: typeof Node.acquireDevice = async (opts: AcquireOptions = {}) => {
  if (opts.paths && !opts.paths.includes('navigator')) {
    throw new NoAdapterError([`no path (paths ${JSON.stringify(opts.paths)}; a page has only navigator)`], PAGE_ADVICE);
  }
  const page = globalThis as PageGlobals;
  const gpu = page.navigator?.gpu;
  if (!gpu || !page.GPUBufferUsage || !page.GPUMapMode) {
    throw new NoAdapterError(
      ['navigator (navigator.gpu is undefined: this browser has no WebGPU, or the page is not a secure context)'],
      PAGE_ADVICE,
    );
  }
  const adapter = await gpu.requestAdapter(opts.powerPreference ? { powerPreference: opts.powerPreference } : {});
  if (!adapter) throw new NoAdapterError(['navigator (requestAdapter() gave no adapter)'], PAGE_ADVICE);
  return openDevice('navigator', gpu, adapter, { GPUBufferUsage: page.GPUBufferUsage, GPUMapMode: page.GPUMapMode });
};
