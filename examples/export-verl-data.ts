/**
 * Writes python/tests/data (see examples/golden/verl-data.ts): each export as the command writes it (run through
 * bin/rlvr.mjs, which rebuilds the CLI when its sources changed), and rows.json.
 *
 *   node esbuild.config.mjs && node dist/examples/export-verl-data.js
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DATA_DIR, DATA_EXPORTS, rowsJson } from './golden/verl-data.js';

for (const [name, argv] of Object.entries(DATA_EXPORTS)) {
  const args = ['bin/rlvr.mjs', 'export-data', ...argv, '--output', join(DATA_DIR, name), '--overwrite'];
  const run = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`rlvr export-data for ${name} ended with status ${run.status}`);
}
writeFileSync(join(DATA_DIR, 'rows.json'), await rowsJson(DATA_DIR));
console.log(`wrote ${join(DATA_DIR, 'rows.json')}`);
