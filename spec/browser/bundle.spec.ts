import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildForBrowser } from '../../esbuild.browser.mjs';

/** The browser build: Node's platform files are swapped for their twins, and a Node-only import fails the build. */
const out = mkdtempSync(join(tmpdir(), 'rlvr-bundle-'));
afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('browser build', () => {
  it('bundles the library with the page twins of the Node platform files, and no Dawn, fs or path', async () => {
    const inputs = Object.keys(
      (await buildForBrowser({ entryPoints: { index: 'src/index.ts' }, outdir: join(out, 'lib'), sourcemap: false }))
        .inputs,
    );
    expect(inputs).toContain('src/backends/webgpu/platform.browser.ts');
    expect(inputs).toContain('src/platform/files.browser.ts');
    expect(inputs).not.toContain('src/backends/webgpu/platform.ts');
    expect(inputs).not.toContain('src/platform/files.ts');
    expect(inputs).toContain('src/platform/host.browser.ts');
    expect(inputs).not.toContain('src/platform/host.ts');
    // Packages bundled: fp-ts and the Hub tokenizer and chat-template packages (plain JavaScript); nothing else.
    const pure = ['fp-ts', '@huggingface/tokenizers', '@huggingface/jinja'];
    const packages = inputs.filter((i) => i.includes('node_modules/'));
    expect(packages.filter((i) => !pure.some((p) => i.includes(`node_modules/${p}/`)))).toEqual([]);
  });

  it('fails, naming importer and module, when page code imports a Node built-in or a Node-only package', async () => {
    const offender = {
      contents: "import 'node:fs';\nimport 'webgpu';\nimport 'cli-progress';\n",
      resolveDir: '.',
      sourcefile: 'offender.ts',
      loader: 'ts' as const,
    };
    const err = await buildForBrowser({ stdin: offender, outdir: join(out, 'bad') }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    const message = (err as Error).message;
    for (const m of ['offender.ts imports node:fs', 'offender.ts imports webgpu', 'offender.ts imports cli-progress'])
      expect(message).toContain(m);
  });
});
