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
export { appendFileSync, writeSync } from 'node:fs';
export { basename, dirname, join, resolve, sep } from 'node:path';

import { constants, mkdirSync as mkdirNowSync, statSync as statNowSync, type Stats } from 'node:fs';
import {
  lstat as lstatFile,
  mkdir as mkdirOne,
  open as openFile,
  realpath as realpathFile,
  stat as statOne,
  type FileHandle as Handle,
} from 'node:fs/promises';
import { dirname as parentOf } from 'node:path';
import { FileSystemError, notRegularFile } from './errors.js';

/**
 * Create a directory and its missing parents, one level at a time, each made once. Node 20's
 * `mkdir(path, { recursive: true })` never settles where a parent exists but takes no new entries with ENOENT
 * (`/proc/1/x`): it makes the parent again, finds it there, and retries forever, spinning a thread of the pool
 * that no signal stops. Here the levels to make are found by walking up to the first that exists (as many steps
 * as the path has components), then made top down, so a level that cannot be made is a `FileSystemError`
 * naming it. An existing directory is fine; something else in its place is ENOTDIR.
 */
export async function makeDirectories(path: string): Promise<void> {
  const missing: string[] = [];
  for (let p = path; ; p = parentOf(p)) {
    const st = await statOne(p).catch((e: NodeJS.ErrnoException) => missingOr(p, e));
    if (st) {
      existingDirectory(p, st);
      break;
    }
    missing.push(p);
    if (parentOf(p) === p) break;
  }
  for (const p of missing.reverse()) {
    await mkdirOne(p).catch(async (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EEXIST') throw levelFailure(p, e);
      existingDirectory(p, await statOne(p).catch((err: unknown) => Promise.reject(FileSystemError.from(p, err))));
    });
  }
}

/** `makeDirectories`, synchronously (for a writer that appends synchronously, such as metrics.jsonl's). */
export function makeDirectoriesSync(path: string): void {
  const missing: string[] = [];
  for (let p = path; ; p = parentOf(p)) {
    let st: Stats | null;
    try {
      st = statNowSync(p);
    } catch (e) {
      st = missingOr(p, e as NodeJS.ErrnoException);
    }
    if (st) {
      existingDirectory(p, st);
      break;
    }
    missing.push(p);
    if (parentOf(p) === p) break;
  }
  for (const p of missing.reverse()) {
    try {
      mkdirNowSync(p);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw levelFailure(p, e as NodeJS.ErrnoException);
      existingDirectory(p, statNowSync(p));
    }
  }
}

/** null for a level that does not exist yet (ENOENT); any other failure names the level. */
function missingOr(p: string, e: NodeJS.ErrnoException): null {
  if (e.code === 'ENOENT') return null;
  throw FileSystemError.from(p, e);
}

function existingDirectory(p: string, st: Stats): void {
  if (!st.isDirectory())
    throw new FileSystemError(p, 'ENOTDIR', 'exists and is not a directory, so nothing can be created in it (ENOTDIR)');
}

/** A level that could not be made. ENOENT with its parent in place: the parent takes no new entries (/proc, say). */
const levelFailure = (p: string, e: NodeJS.ErrnoException): FileSystemError =>
  e.code === 'ENOENT'
    ? new FileSystemError(p, 'ENOENT', 'cannot be created: its parent directory takes no new entries (ENOENT)')
    : FileSystemError.from(p, e);

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
