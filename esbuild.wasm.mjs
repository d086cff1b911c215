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
 * relaxed SIMD, whose `f32x4.relaxed_madd` is WebAssembly's only fused multiply-add (Node >= 22, Chrome >= 114);
 * `-memory64` addresses a shared 64-bit memory (memory64: Node >= 24, Chrome >= 133), past a 32-bit one's 4 GiB.
 */
export const KERNELS_MODULE = /[\\/]assembly[\\/]kernels(-fma)?(-unshared|-memory64)?\.wasm$/;

/** The build a module path names: `{ shared, fma, memory64 }`. */
export const kernelsVariant = (path) => ({
  shared: !path.includes('-unshared'),
  fma: path.includes('-fma'),
  memory64: path.includes('-memory64'),
});

// 128-bit SIMD, and shared memory (threads) unless unshared; relaxed SIMD only in the `fma` build, whose results
// may differ by processor (fused or not) but not between runs or threads on one machine. The memory is the host's
// (imported, up to 4 GiB; a memory64 build's up to `MEMORY64_MAX_PAGES`); no runtime or allocator inside (the host
// manages the heap).
const flags = ({ shared, fma, memory64 = false }) => [
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
  ['simd', ...(shared ? ['threads'] : []), ...(fma ? ['relaxed-simd'] : []), ...(memory64 ? ['memory64'] : [])].join(
    ',',
  ),
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

/**
 * The largest memory a memory64 build imports, in 64 KiB pages: 16 GiB, V8's limit for one memory64 (Node 24-26,
 * Chrome), which also refuses to compile a module declaring more. The host may make the memory smaller.
 */
export const MEMORY64_MAX_PAGES = 262_144;

/**
 * AssemblyScript 0.28's command line compiles for wasm32 only (it sets the target itself), and its memory64 feature
 * alone leaves pointers 32-bit. This transform makes the program a wasm64 one before it is compiled (the target,
 * and the size type of the module the program built when it was created, the one thing made before this hook), so
 * `usize` is 64-bit and every address computation i64; then, compiled, it declares the imported memory 64-bit (the
 * compiler declares every memory 32-bit) with its data segments at i64 offsets. The compiler validates the module
 * after this hook: a later AssemblyScript that builds differently fails the build there, not at run time.
 */
class Memory64 {
  afterParse() {
    this.program.options.target = 2; // Target.Wasm64
    this.program.module.sizeType = this.binaryen.i64;
  }

  afterCompile(module) {
    const memory = module.getMemoryInfo();
    const segments = [];
    for (let i = 0; i < module.getNumDataSegments(); i++) {
      const info = module.getDataSegmentInfo(module.getDataSegmentByIndex(i));
      const offset = info.passive ? undefined : module.i64.const(BigInt(info.offset));
      segments.push({ offset, data: new Uint8Array(info.data), passive: info.passive });
    }
    // setMemory replaces the memory (and drops its import), so it is imported again under the same name.
    module.setMemory(memory.initial, MEMORY64_MAX_PAGES, null, segments, memory.shared, true, '0');
    module.addMemoryImport('0', memory.module, memory.base, memory.shared);
  }
}

function sources() {
  return readdirSync(ASSEMBLY_DIR)
    .filter((f) => f.endsWith('.ts'))
    .sort()
    .map((f) => [f, readFileSync(join(ASSEMBLY_DIR, f), 'utf8')]);
}

/**
 * The kernels module as base64 (compiled, or from the cache) for a build `{ shared, fma, memory64 }` (see
 * kernelsVariant). Throws with the compiler's messages on an error.
 */
export async function compileKernels(variant = { shared: true, fma: false, memory64: false }) {
  if (variant.memory64 && !variant.shared) throw new Error('a memory64 build of the kernels imports a shared memory');
  const FLAGS = flags(variant);
  // A class of its own per compile: the compiler puts the program on the transform's prototype.
  const transforms = variant.memory64 ? [class extends Memory64 {}] : [];
  const srcs = sources();
  const hash = createHash('sha256')
    .update(JSON.stringify(variant.memory64 ? [FLAGS, Memory64.toString(), MEMORY64_MAX_PAGES, srcs] : [FLAGS, srcs]))
    .digest('hex')
    .slice(0, 16);
  const cacheDir = resolve('node_modules/.cache/rlvr-wasm');
  const cached = join(cacheDir, `${hash}.wasm`);
  if (existsSync(cached)) return readFileSync(cached).toString('base64');
  let binary = null;
  const stderr = [];
  const { error } = await asc.main([join(ASSEMBLY_DIR, 'index.ts'), ...FLAGS, '--outFile', 'kernels.wasm'], {
    transforms,
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
