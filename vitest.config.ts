import { defineConfig } from 'vitest/config';
import { compileKernels, KERNELS_MODULE, kernelsVariant } from './esbuild.wasm.mjs';

export default defineConfig({
  plugins: [
    {
      // The CPU backend's kernels, compiled from their AssemblyScript sources as the bundles' esbuild plugin does.
      name: 'wasm-kernels',
      resolveId(id: string, importer?: string) {
        return KERNELS_MODULE.test(id) && importer ? `\0wasm-kernels:${id}` : null;
      },
      async load(id: string) {
        if (!id.startsWith('\0wasm-kernels:')) return null;
        return `export default ${JSON.stringify(await compileKernels(kernelsVariant(id)))};`;
      },
    },
    {
      // WGSL shaders are imported as text, as esbuild's text loader does in the bundles.
      name: 'wgsl-as-text',
      transform(code: string, id: string) {
        return id.endsWith('.wgsl') ? { code: `export default ${JSON.stringify(code)};`, map: null } : null;
      },
    },
  ],
  test: {
    include: ['spec/**/*.spec.ts'],
    setupFiles: ['spec/setup.ts'],
    // Kernels use their fixed default configurations: a spec's dispatches are its own, and each tuning
    // candidate is a correctness case of its own (spec/webgpu/tune.spec.ts turns tuning on for itself).
    env: { RLVR_TUNE: 'off' },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two spec files at a time on a 2-core machine (vitest's default is cores - 1: one at a time there). Many files
    // wait on a child process, a browser or the device more than they compute.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
