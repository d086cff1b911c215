/**
 * The library's one door to the host's files and paths: Node's own functions. The browser build replaces this
 * file with `files.browser.ts` (same exports), whose functions throw `NodeOnlyError`, so code that writes files
 * (checkpoints, metrics.jsonl, Hub model directories) bundles for a page and fails there with a clear error only
 * if it is reached.
 */
export {
  access,
  copyFile,
  link,
  lstat,
  mkdir,
  open,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  stat,
  symlink,
  truncate,
  unlink,
  writeFile,
  type FileHandle,
} from 'node:fs/promises';
export { appendFileSync, mkdirSync } from 'node:fs';
export { basename, dirname, join, resolve, sep } from 'node:path';
