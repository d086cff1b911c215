#!/usr/bin/env node
// `rlvr`, the package's bin: runs the CLI bundle, dist/cli/main.js. In a clone of the repository (its sources
// beside it) the bundle is built first when it is missing or older than a source it was built from, and only
// then: a fresh clone's `npx rlvr` works, and `npm run rlvr` costs a build only after an edit. An installed
// package ships the bundle and has no sources: it just runs it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const main = join(root, 'dist', 'cli', 'main.js');
const config = join(root, 'esbuild.config.mjs');
if (existsSync(config) && existsSync(join(root, 'src', 'cli', 'main.ts'))) {
  const { cliIsStale } = await import(pathToFileURL(config).href);
  if (cliIsStale(root)) {
    const r = spawnSync(process.execPath, [config, '--cli'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    if (r.status !== 0) {
      console.error('rlvr: building dist/cli/main.js failed (were the dependencies installed? npm ci)');
      process.exit(1);
    }
  }
}
if (!existsSync(main)) {
  console.error(`rlvr: ${main} is missing (in a clone of the repository: npm run build)`);
  process.exit(1);
}
await import(pathToFileURL(main).href);
