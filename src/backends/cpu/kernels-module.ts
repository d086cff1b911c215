import kernelsBase64 from './assembly/kernels.wasm';

let compiled: WebAssembly.Module | null = null;

/** The compiled kernels module (compiled once per process; WebAssembly.Module is shareable with workers). */
export function kernelsModule(): WebAssembly.Module {
  if (compiled === null) {
    const bin = atob(kernelsBase64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    compiled = new WebAssembly.Module(bytes);
  }
  return compiled;
}

/** The functions the kernels module exports (`assembly/index.ts`), which the runtime calls by name. */
export const kernelExports = (module: WebAssembly.Module): string[] =>
  WebAssembly.Module.exports(module)
    .filter((e) => e.kind === 'function')
    .map((e) => e.name);
