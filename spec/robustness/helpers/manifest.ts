import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MANIFEST, MANIFEST_FORMAT } from '../../../src/io/atomic-dir.js';
import { sha256Hex } from '../../../src/platform/host.js';

/**
 * Rewrite a checkpoint directory's manifest to match its files as they are now: what an attacker (or a careless
 * edit followed by a careless fix) produces, so a spec can show that the loader's own checks refuse what the
 * manifest no longer can.
 */
export function resealManifest(dir: string): void {
  const files: Record<string, { size: number; sha256: string }> = {};
  for (const name of readdirSync(dir).sort()) {
    if (name === MANIFEST) continue;
    const data = readFileSync(join(dir, name));
    files[name] = { size: data.byteLength, sha256: sha256Hex(data) };
  }
  writeFileSync(join(dir, MANIFEST), JSON.stringify({ format: MANIFEST_FORMAT, files }, null, 2));
}
