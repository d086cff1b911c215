import sharedBase64 from './assembly/kernels.wasm';
import unsharedBase64 from './assembly/kernels-unshared.wasm';

const compiled = new Map<boolean, WebAssembly.Module>();

/**
 * The compiled kernels module for a shared memory (threads) or an ordinary one (a page that is not cross-origin
 * isolated): compiled once per process; a WebAssembly.Module is shareable with workers.
 */
export function kernelsModule(shared = true): WebAssembly.Module {
  let m = compiled.get(shared);
  if (m === undefined) {
    const bin = atob(shared ? sharedBase64 : unsharedBase64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    m = new WebAssembly.Module(bytes);
    compiled.set(shared, m);
  }
  return m;
}

/** The functions the kernels module exports (`assembly/index.ts`), which the runtime calls by name. */
export const kernelExports = (module: WebAssembly.Module): string[] =>
  WebAssembly.Module.exports(module)
    .filter((e) => e.kind === 'function')
    .map((e) => e.name);
