/**
 * Writes the golden vectors of the Python package (python/tests/golden/*.json): see examples/golden/generate.ts.
 *
 *   npm run export:golden
 *
 * spec/golden/golden.spec.ts fails when the committed files differ from what this writes now.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { goldenFiles } from './golden/generate.js';

const dir = join('python', 'tests', 'golden');
mkdirSync(dir, { recursive: true });
let bytes = 0;
for (const [name, text] of Object.entries(goldenFiles())) {
  writeFileSync(join(dir, name), text);
  bytes += text.length;
}
console.log(`wrote ${dir} (${(bytes / 1e6).toFixed(2)} MB)`);
