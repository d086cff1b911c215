/**
 * Writes the golden vectors of the Python package (python/tests/golden/*.json): see examples/golden/generate.ts.
 *
 *   npm run export:golden
 *
 * spec/golden/golden.spec.ts fails when the committed files differ from what this writes now. Run from the
 * repository's root; a directory or file that cannot be written is one line naming it, exit 3 (as rlvr's).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FileSystemError } from '../src/index.js';
import { goldenFiles } from './golden/generate.js';

const dir = join('python', 'tests', 'golden');

/** Whether `e` is a failure of the file system (Node's error with a code and a system call). */
const isFileFailure = (e: unknown): e is NodeJS.ErrnoException =>
  e instanceof Error && typeof (e as NodeJS.ErrnoException).code === 'string' && 'syscall' in e;

function writeGolden(): number {
  const files = goldenFiles();
  try {
    // One level: python/tests is the repository's own (a recursive mkdir never settles under some directories).
    mkdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  let bytes = 0;
  for (const [name, text] of Object.entries(files)) {
    writeFileSync(join(dir, name), text);
    bytes += text.length;
  }
  return bytes;
}

try {
  const bytes = writeGolden();
  console.log(`wrote ${dir} (${(bytes / 1e6).toFixed(2)} MB)`);
} catch (e) {
  if (!isFileFailure(e)) throw e;
  console.error(`export:golden: ${FileSystemError.from(dir, e).message}`);
  process.exitCode = 3;
}
