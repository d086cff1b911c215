/**
 * `npm run example:browser`: serves the training page that `node esbuild.config.mjs` built into
 * dist/examples/browser/page, on 127.0.0.1, and prints its URL.
 *
 *   npm run example:browser [-- --port 8765]
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { serveStatic } from './server.js';

const { values } = parseArgs({ options: { port: { type: 'string', default: '8765' } } });
const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port ${values.port}: expected an integer in 0..65535`);
  process.exit(2);
}
const dir = join('dist', 'examples', 'browser', 'page');
if (!existsSync(join(dir, 'index.html'))) {
  console.error(`${dir}/index.html is missing: run \`node esbuild.config.mjs\` first (npm run example:browser does)`);
  process.exit(1);
}
try {
  const { url } = await serveStatic(dir, port);
  console.log(`training page: ${url}  (Ctrl-C to stop)`);
} catch (e) {
  console.error(`cannot serve on 127.0.0.1:${port}: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
}
