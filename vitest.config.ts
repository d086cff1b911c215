import { defineConfig } from 'vitest/config';

export default defineConfig({
  plugins: [
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
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
