import sharedBase64 from './assembly/kernels.wasm';
import unsharedBase64 from './assembly/kernels-unshared.wasm';
import fmaSharedBase64 from './assembly/kernels-fma.wasm';
import fmaUnsharedBase64 from './assembly/kernels-fma-unshared.wasm';

/**
 * One build of the kernels: for a shared memory (threads) or an ordinary one (a page that is not cross-origin
 * isolated); plain 128-bit SIMD, or relaxed SIMD, whose `f32x4.relaxed_madd` is WebAssembly's fused multiply-add.
 */
export interface KernelsBuild {
  readonly shared: boolean;
  readonly fma: boolean;
}

const BASE64 = {
  plain: { shared: sharedBase64, unshared: unsharedBase64 },
  fma: { shared: fmaSharedBase64, unshared: fmaUnsharedBase64 },
};

const bytesOf = (build: KernelsBuild): Uint8Array => {
  const bin = atob(BASE64[build.fma ? 'fma' : 'plain'][build.shared ? 'shared' : 'unshared']);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
};

const compiled = new Map<string, WebAssembly.Module>();

/** The compiled kernels module of a build: compiled once per process; a WebAssembly.Module is shareable with workers. */
export function kernelsModule(build: KernelsBuild): WebAssembly.Module {
  const key = `${build.shared}/${build.fma}`;
  let m = compiled.get(key);
  if (m === undefined) {
    m = new WebAssembly.Module(bytesOf(build));
    compiled.set(key, m);
  }
  return m;
}

let relaxedSimd: boolean | undefined;

/**
 * Whether this runtime compiles relaxed SIMD (Node >= 22, Chrome >= 114; Node 20 only behind a flag): the fma build
 * itself is what is validated, so the answer is exactly "can this module run here".
 */
export function runtimeHasRelaxedSimd(): boolean {
  if (relaxedSimd === undefined) relaxedSimd = WebAssembly.validate(bytesOf({ shared: false, fma: true }));
  return relaxedSimd;
}

/** The functions the kernels module exports (`assembly/index.ts`), which the runtime calls by name. */
export const kernelExports = (module: WebAssembly.Module): string[] =>
  WebAssembly.Module.exports(module)
    .filter((e) => e.kind === 'function')
    .map((e) => e.name);
