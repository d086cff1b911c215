import kernelsBase64 from './assembly/kernels.wasm';

/** The exports of the kernels module (`assembly/index.ts`) that the runtime calls by name. */
export const KERNEL_EXPORTS = ['gemm', 'gemmScratchFloats'] as const;
export type KernelExport = (typeof KERNEL_EXPORTS)[number];

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
