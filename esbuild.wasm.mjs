// The CPU backend's WebAssembly kernels, compiled from their AssemblyScript sources (src/backends/cpu/assembly/)
// whenever a bundle or the specs import `.../assembly/kernels.wasm`: the esbuild plugin (bundles) and the vitest
// plugin (specs) both call `compileKernels`, which yields the module as base64 text. Nothing prebuilt: the sources
// and the npm package `assemblyscript` are all it needs. Compiled modules are cached by a hash of the sources and
// the flags in node_modules/.cache, so repeated builds and spec runs skip the 3-second compile.
import asc from 'assemblyscript/asc';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const ASSEMBLY_DIR = resolve('src/backends/cpu/assembly');
/**
 * What source files import: modules that do not exist on disk, compiled on demand. `kernels.wasm` imports a shared
 * memory (threads); `kernels-unshared.wasm` an ordinary one, for a page that is not cross-origin isolated.
 */
export const KERNELS_MODULE = /[\\/]assembly[\\/]kernels(-unshared)?\.wasm$/;

// 128-bit SIMD and shared memory (threads); no relaxed SIMD, whose results may differ by processor. The memory is
// the host's (imported, shared, up to 4 GiB); no runtime or allocator inside (the host manages the heap).
const flags = (shared) => [
  '-O3',
  '--runtime',
  'stub',
  '--importMemory',
  ...(shared ? ['--sharedMemory'] : []),
  '--initialMemory',
  '32',
  '--maximumMemory',
  '65536',
  '--enable',
  shared ? 'simd,threads' : 'simd',
  '--disable',
  'relaxed-simd',
  '--noAssert',
  '--use',
  'abort=',
];

/** The kernels' source files, relative to the repository root (what a compiled module was built from). */
export const kernelSourceFiles = () =>
  readdirSync(ASSEMBLY_DIR)
    .filter((f) => f.endsWith('.ts'))
    .sort()
    .map((f) => join('src/backends/cpu/assembly', f));

function sources() {
  return readdirSync(ASSEMBLY_DIR)
    .filter((f) => f.endsWith('.ts'))
    .sort()
    .map((f) => [f, readFileSync(join(ASSEMBLY_DIR, f), 'utf8')]);
}

/**
 * The kernels module as base64 (compiled, or from the cache), for a shared memory or not. Throws with the compiler's
 * messages on an error.
 */
export async function compileKernels(shared = true) {
  const FLAGS = flags(shared);
  const srcs = sources();
  const hash = createHash('sha256')
    .update(JSON.stringify([FLAGS, srcs]))
    .digest('hex')
    .slice(0, 16);
  const cacheDir = resolve('node_modules/.cache/rlvr-wasm');
  const cached = join(cacheDir, `${hash}.wasm`);
  if (existsSync(cached)) return readFileSync(cached).toString('base64');
  let binary = null;
  const stderr = [];
  const { error } = await asc.main([join(ASSEMBLY_DIR, 'index.ts'), ...FLAGS, '--outFile', 'kernels.wasm'], {
    writeFile: (name, contents) => {
      if (name.endsWith('.wasm')) binary = contents;
    },
    stdout: { write: () => true },
    stderr: { write: (s) => stderr.push(String(s)) },
  });
  if (error || binary === null) throw new Error(`AssemblyScript compile failed:\n${stderr.join('')}\n${error ?? ''}`);
  mkdirSync(cacheDir, { recursive: true });
  const tmp = `${cached}.${process.pid}.tmp`;
  writeFileSync(tmp, binary);
  renameSync(tmp, cached);
  return Buffer.from(binary).toString('base64');
}

/** esbuild plugin: `import kernels from './assembly/kernels.wasm'` (or `kernels-unshared.wasm`) gives base64 text. */
export const wasmKernels = {
  name: 'wasm-kernels',
  setup(b) {
    b.onResolve({ filter: KERNELS_MODULE }, (args) => ({
      path: resolve(args.resolveDir, args.path),
      namespace: 'wasm-kernels',
    }));
    b.onLoad({ filter: /.*/, namespace: 'wasm-kernels' }, async (args) => ({
      contents: `export default ${JSON.stringify(await compileKernels(!args.path.endsWith('-unshared.wasm')))};`,
      loader: 'js',
      watchFiles: sources().map(([f]) => join(ASSEMBLY_DIR, f)),
    }));
  },
};
