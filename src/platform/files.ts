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
export { appendFileSync, mkdirSync, writeSync } from 'node:fs';
export { basename, dirname, join, resolve, sep } from 'node:path';

import { constants } from 'node:fs';
import {
  lstat as lstatFile,
  open as openFile,
  realpath as realpathFile,
  type FileHandle as Handle,
} from 'node:fs/promises';
import { notRegularFile } from './errors.js';

/**
 * Open a file for reading only if it is a regular file. The open is non-blocking, so a FIFO nobody writes cannot
 * hang it (nor a thread of the pool), and the handle is checked with fstat before anything is read: a directory,
 * FIFO, socket or device is an error with code ENOTREG and the path, as Node's own errors have.
 */
export async function openRegular(path: string, opts: { noFollow?: boolean } = {}): Promise<Handle> {
  // noFollow: a symbolic link as the last component is refused by the open itself (ELOOP), not checked before it,
  // so the file cannot be swapped for a link in between.
  const noFollow = opts.noFollow ? (constants.O_NOFOLLOW ?? 0) : 0;
  const h = await openFile(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | noFollow);
  try {
    if ((await h.stat()).isFile()) return h;
  } catch (e) {
    await h.close();
    throw e;
  }
  await h.close();
  throw notRegularFile(path);
}

/**
 * A regular file's contents (see `openRegular`), as bytes or as UTF-8 text. With `{ noFollow: true }` a path whose
 * last component is a symbolic link fails with ELOOP.
 */
export async function readRegularFile(path: string, opts?: { noFollow?: boolean }): Promise<Buffer>;
export async function readRegularFile(path: string, encoding: 'utf8'): Promise<string>;
export async function readRegularFile(path: string, arg?: 'utf8' | { noFollow?: boolean }): Promise<Buffer | string> {
  const encoding = typeof arg === 'string' ? arg : undefined;
  const h = await openRegular(path, typeof arg === 'object' ? arg : {});
  try {
    return encoding ? await h.readFile({ encoding }) : await h.readFile();
  } finally {
    await h.close();
  }
}

/**
 * Whether `path` names its file directly: not through a symbolic link as its last component, and not a kernel
 * pseudo-file (/proc, /sys, /dev, where a "file" is the process's environment or memory). Only such a file's
 * content is quoted in messages; false when it cannot be told.
 */
export async function isDirectFile(path: string): Promise<boolean> {
  try {
    if ((await lstatFile(path)).isSymbolicLink()) return false;
    const real = await realpathFile(path);
    return !/^\/(proc|sys|dev)(\/|$)/.test(real);
  } catch {
    return false;
  }
}
