// Bundles the library entry, the CLI and the examples for Node (ESM), with .wgsl shaders loaded as text and the CPU
// backend's kernels compiled to WebAssembly (esbuild.wasm.mjs); and the
// library for pages (dist/browser/index.js, see esbuild.browser.mjs), checked to hold no Node-only module.
// `--example-page` also builds the training page of examples/browser into dist/examples/browser/page.
// `--cli` builds only the library entry and the CLI (what `rlvr` runs), and only when they are missing or older
// than a source they were built from (`cliIsStale`, which the `rlvr` launcher in bin/ checks itself first).
// `--package` builds what the npm package ships (package.json's `files`, `prepack`): the library entry, the CLI and
// the page bundle, without source maps, and clears dist/types for the declarations `prepack` emits next.
// Types (.d.ts) are emitted separately by `tsc -p tsconfig.build.json` (see the `build` and `prepack` scripts).
import { build } from 'esbuild';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildBrowserExample, buildForBrowser } from './esbuild.browser.mjs';
import { kernelSourceFiles, wasmKernels } from './esbuild.wasm.mjs';

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  loader: { '.wgsl': 'text' },
  // The CPU backend's WebAssembly kernels, compiled from src/backends/cpu/assembly/ (AssemblyScript).
  plugins: [wasmKernels],
  // Native and heavy packages stay external: they are resolved from node_modules at run time.
  packages: 'external',
  logLevel: 'warning',
};

/** Where the CLI build records the sources it read (esbuild's metafile inputs), for the staleness check. */
export const CLI_INPUTS = 'dist/.cli-inputs.json';
const CLI_OUTPUT = 'dist/cli/main.js';

/** Whether dist/cli/main.js is missing or older than any source it was built from (or this file). */
export function cliIsStale(root = '.') {
  const output = join(root, CLI_OUTPUT);
  const record = join(root, CLI_INPUTS);
  if (!existsSync(output) || !existsSync(record)) return true;
  const built = statSync(output).mtimeMs;
  const inputs = [
    ...JSON.parse(readFileSync(record, 'utf8')),
    'esbuild.config.mjs',
    'esbuild.wasm.mjs',
    'package.json',
  ];
  return inputs.some((f) => !existsSync(join(root, f)) || statSync(join(root, f)).mtimeMs > built);
}

async function buildCli(options = {}) {
  const result = await build({
    ...common,
    ...options,
    entryPoints: { index: 'src/index.ts', 'cli/main': 'src/cli/main.ts' },
    outdir: 'dist',
    metafile: true,
  });
  mkdirSync(dirname(CLI_INPUTS), { recursive: true });
  // The compiled kernels are a module of the plugin's namespace, not a file: record their sources instead.
  const inputs = Object.keys(result.metafile.inputs).flatMap((f) => (f.startsWith('wasm-kernels:') ? [] : [f]));
  writeFileSync(CLI_INPUTS, JSON.stringify([...inputs, ...kernelSourceFiles()]));
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain && process.argv.includes('--cli')) {
  if (cliIsStale()) await buildCli();
} else if (isMain && process.argv.includes('--package')) {
  // The package holds no sources, so a map would point at files it lacks: its bundles carry none.
  await buildCli({ sourcemap: false });
  await buildForBrowser({ entryPoints: { index: 'src/index.ts' }, outdir: 'dist/browser', sourcemap: false });
  // Declarations of a file no longer reached from src/index.ts must not ship.
  rmSync('dist/types', { recursive: true, force: true });
} else if (isMain) {
  const examples = readdirSync('examples')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `examples/${f}`)
    // The experiment runner and the page's server live in their own folders; bundled beside the other examples.
    .concat(['examples/experiments/run.ts', 'examples/browser/serve.ts']);
  const benches = readdirSync('bench')
    .filter((f) => f.endsWith('.ts'))
    .map((f) => `bench/${f}`);
  await buildCli();
  await build({ ...common, entryPoints: [...examples, ...benches], outdir: 'dist', outbase: '.' });
  // Self-contained (fp-ts and the shaders inside): a page can load it as a module without an import map.
  await buildForBrowser({ entryPoints: { index: 'src/index.ts' }, outdir: 'dist/browser' });
  if (process.argv.includes('--example-page')) await buildBrowserExample('dist/examples/browser/page');
}
