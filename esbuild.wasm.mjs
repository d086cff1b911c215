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
 * memory (threads), `-unshared` an ordinary one (a page that is not cross-origin isolated); `-fma` is built with
 * relaxed SIMD, whose `f32x4.relaxed_madd` is WebAssembly's only fused multiply-add (Node >= 22, Chrome >= 114).
 */
export const KERNELS_MODULE = /[\\/]assembly[\\/]kernels(-fma)?(-unshared)?\.wasm$/;

/** The build a module path names: `{ shared, fma }`. */
export const kernelsVariant = (path) => ({ shared: !path.includes('-unshared'), fma: path.includes('-fma') });

// 128-bit SIMD, and shared memory (threads) unless unshared; relaxed SIMD only in the `fma` build, whose results
// may differ by processor (fused or not) but not between runs or threads on one machine. The memory is the host's
// (imported, up to 4 GiB); no runtime or allocator inside (the host manages the heap).
const flags = ({ shared, fma }) => [
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
  ['simd', ...(shared ? ['threads'] : []), ...(fma ? ['relaxed-simd'] : [])].join(','),
  ...(fma ? [] : ['--disable', 'relaxed-simd']),
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
 * The kernels module as base64 (compiled, or from the cache) for a build `{ shared, fma }` (see kernelsVariant).
 * Throws with the compiler's messages on an error.
 */
export async function compileKernels(variant = { shared: true, fma: false }) {
  const FLAGS = flags(variant);
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

/** esbuild plugin: `import kernels from './assembly/kernels.wasm'` (or another build's name) gives base64 text. */
export const wasmKernels = {
  name: 'wasm-kernels',
  setup(b) {
    b.onResolve({ filter: KERNELS_MODULE }, (args) => ({
      path: resolve(args.resolveDir, args.path),
      namespace: 'wasm-kernels',
    }));
    b.onLoad({ filter: /.*/, namespace: 'wasm-kernels' }, async (args) => ({
      contents: `export default ${JSON.stringify(await compileKernels(kernelsVariant(args.path)))};`,
      loader: 'js',
      watchFiles: sources().map(([f]) => join(ASSEMBLY_DIR, f)),
    }));
  },
};
