// Bundles the library entry, the CLI and the examples for Node (ESM), with .wgsl shaders loaded as text.
// Types (.d.ts) are emitted separately by `tsc -p tsconfig.build.json` (see the `build` script).
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';

const examples = readdirSync('examples')
  .filter((f) => f.endsWith('.ts'))
  .map((f) => `examples/${f}`)
  // The experiment runner lives in its own folder; its entry points are bundled beside the other examples.
  .concat(['examples/experiments/run.ts']);
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
  // Native and heavy packages stay external: they are resolved from node_modules at run time.
  packages: 'external',
  logLevel: 'warning',
};

await build({ ...common, entryPoints: { index: 'src/index.ts', 'cli/main': 'src/cli/main.ts' }, outdir: 'dist' });
await build({ ...common, entryPoints: [...examples, ...benches], outdir: 'dist', outbase: '.' });
