// The browser build: bundles for a page or a worker, with two rules a Node bundle does not need.
//  1. Twins: a source file `X.ts` under src/ that has a sibling `X.browser.ts` is replaced by it (same exports,
//     type-checked against X.ts). Node's platform code has twins: src/platform/files.ts (fs, path) and
//     src/backends/webgpu/platform.ts (Dawn; its twin takes navigator.gpu).
//  2. No Node-only module: Node's built-in modules and the Node-only packages are left external, so that an import
//     of one shows in esbuild's metafile with its importer; `checkBrowserBundle` then fails the build naming both.
import { build } from 'esbuild';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, resolve } from 'node:path';
import { wasmKernels } from './esbuild.wasm.mjs';

/** Packages that run only in Node: Dawn's native bindings, the terminal progress bar. */
export const NODE_ONLY_PACKAGES = ['webgpu', 'cli-progress'];

const SRC = resolve('src');

/** esbuild plugin: resolve each relative import as usual, then take `X.browser.ts` in place of `X.ts` if it exists. */
export const browserTwins = {
  name: 'browser-twins',
  setup(b) {
    b.onResolve({ filter: /^\.\.?\// }, async (args) => {
      if (args.pluginData === 'twin') return undefined;
      const r = await b.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: 'twin',
      });
      if (r.errors.length > 0 || !r.path.startsWith(SRC) || !r.path.endsWith('.ts')) return r;
      const twin = r.path.replace(/\.ts$/, '.browser.ts');
      return existsSync(twin) ? { ...r, path: twin } : r;
    });
  },
};

const isLeftOut = (path) =>
  path.startsWith('node:') ||
  builtinModules.includes(path) ||
  NODE_ONLY_PACKAGES.some((p) => path === p || path.startsWith(`${p}/`));

/**
 * Every module import the page bundle left out (a Node built-in or a Node-only package),
 * with its importer. A page cannot load any of them, so the list must be empty.
 */
export function nodeOnlyImports(metafile) {
  const found = [];
  for (const [input, info] of Object.entries(metafile.inputs)) {
    // Only the modules this build leaves out can be external for a reason; any other import marked external is
    // one esbuild elided (used for types only, e.g. fp-ts's Either as a type): it is not in the bundle.
    for (const imp of info.imports) if (imp.external && isLeftOut(imp.path)) found.push(`${input} imports ${imp.path}`);
    if (/(^|\/)node_modules\/(webgpu|cli-progress)\//.test(input)) found.push(`${input} is a Node-only package`);
  }
  return found;
}

/** Throw, naming each offender, if the bundle holds a Node-only module. */
export function checkBrowserBundle(metafile, what) {
  const found = nodeOnlyImports(metafile);
  if (found.length > 0) {
    throw new Error(
      `the browser bundle ${what} would need Node-only modules:\n  ${found.join('\n  ')}\n` +
        'Route file access through src/platform/files.ts and keep Node-only code out of what a page imports.',
    );
  }
}

/**
 * Bundle entry points for a page or a worker (ESM, .wgsl as text, the CPU kernels compiled), then check the bundle.
 * Returns esbuild's metafile. Options: outdir, entryPoints, and any esbuild option to override.
 */
export async function buildForBrowser(options) {
  const result = await build({
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    sourcemap: true,
    loader: { '.wgsl': 'text' },
    external: ['node:*', ...builtinModules, ...NODE_ONLY_PACKAGES],
    plugins: [browserTwins, wasmKernels],
    metafile: true,
    logLevel: 'warning',
    ...options,
  });
  checkBrowserBundle(result.metafile, relative('.', options.outdir));
  return result.metafile;
}

/** The training page of examples/browser: its page script and worker (sharing chunks) and index.html, in `outdir`. */
export async function buildBrowserExample(outdir) {
  const metafile = await buildForBrowser({
    entryPoints: { main: 'examples/browser/main.ts', worker: 'examples/browser/worker.ts' },
    outdir,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    minify: true,
  });
  mkdirSync(outdir, { recursive: true });
  copyFileSync('examples/browser/index.html', join(outdir, 'index.html'));
  return metafile;
}
