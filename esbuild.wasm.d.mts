// Types of esbuild.wasm.mjs, for the TypeScript that imports it (vitest.config.ts, specs that bundle).
import type { Plugin } from 'esbuild';

export declare const ASSEMBLY_DIR: string;
export declare const KERNELS_MODULE: RegExp;
/** The kernels' source files, relative to the repository root. */
export declare function kernelSourceFiles(): string[];
/**
 * Which build a module path names: a shared memory (threads) or not, relaxed SIMD (fused multiply-add) or not, a
 * 64-bit memory (memory64, shared only) or a 32-bit one.
 */
export interface KernelsVariant {
  readonly shared: boolean;
  readonly fma: boolean;
  readonly memory64?: boolean;
}
/** The largest memory a memory64 build imports, in 64 KiB pages (V8's limit: 16 GiB). */
export declare const MEMORY64_MAX_PAGES: number;
export declare function kernelsVariant(path: string): KernelsVariant;
/** The kernels module compiled from src/backends/cpu/assembly/, as base64 (cached by a hash of the sources). */
export declare function compileKernels(variant?: KernelsVariant): Promise<string>;
/** esbuild plugin: `import kernels from './assembly/kernels.wasm'` gives the module as base64 text. */
export declare const wasmKernels: Plugin;
