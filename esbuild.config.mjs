// Bundles the library entry, the CLI and the examples for Node (ESM), with .wgsl shaders loaded as text and the CPU
// backend's kernels compiled to WebAssembly (esbuild.wasm.mjs); and the
// library for pages (dist/browser/index.js, see esbuild.browser.mjs), checked to hold no Node-only module.
// `--example-page` also builds the training page of examples/browser into dist/examples/browser/page.
// Types (.d.ts) are emitted separately by `tsc -p tsconfig.build.json` (see the `build` script).
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';
import { buildBrowserExample, buildForBrowser } from './esbuild.browser.mjs';
import { wasmKernels } from './esbuild.wasm.mjs';

const examples = readdirSync('examples')
  .filter((f) => f.endsWith('.ts'))
  .map((f) => `examples/${f}`)
  // The experiment runner and the page's server live in their own folders; bundled beside the other examples.
  .concat(['examples/experiments/run.ts', 'examples/browser/serve.ts']);
const benches = readdirSync('bench')
  .filter((f) => f.endsWith('.ts'))
  .map((f) => `bench/${f}`);

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

await build({ ...common, entryPoints: { index: 'src/index.ts', 'cli/main': 'src/cli/main.ts' }, outdir: 'dist' });
await build({ ...common, entryPoints: [...examples, ...benches], outdir: 'dist', outbase: '.' });
// Self-contained (fp-ts and the shaders inside): a page can load it as a module without an import map.
await buildForBrowser({ entryPoints: { index: 'src/index.ts' }, outdir: 'dist/browser' });
if (process.argv.includes('--example-page')) await buildBrowserExample('dist/examples/browser/page');
