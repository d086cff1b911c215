import { RlvrError } from '../core/errors.js';

/** Something that needs Node (a file, a path) was asked for in a page. Names the operation. */
export class NodeOnlyError extends RlvrError {
  constructor(readonly operation: string) {
    super(
      `${operation} needs Node (files and paths do not exist in a page): leave outputDir and resume unset there, ` +
        'and save checkpoints as bytes (checkpointToBytes / checkpointFromBytes)',
    );
  }
}

/**
 * A file system failure, as one line: the path and the cause (the system's code and message). Thrown by the
 * writers of files (checkpoints, metrics, the output directory) and shown by the CLI as is.
 */
export class FileSystemError extends RlvrError {
  constructor(
    readonly path: string,
    readonly code: string,
    detail: string,
  ) {
    super(`${path}: ${detail}`);
  }
  static from(path: string, e: unknown): FileSystemError {
    if (e instanceof FileSystemError) return e;
    const err = e as NodeJS.ErrnoException;
    const { code, cause } = fileErrorCause(e);
    return new FileSystemError(typeof err?.path === 'string' && err.path !== '' ? err.path : path, code, cause);
  }
}

const DESCRIPTIONS: Readonly<Record<string, string>> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ENOSPC: 'no space left on the device',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a component of the path is not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'already exists',
  ENOTEMPTY: 'directory not empty',
  EDQUOT: 'disk quota exceeded',
  ENOTREG: 'is not a regular file (a directory, FIFO, socket or device)',
};

/** A file system failure's code and cause in words, e.g. `no such file or directory (ENOENT)`. */
export function fileErrorCause(e: unknown): { code: string; cause: string } {
  const err = e as NodeJS.ErrnoException;
  const code = typeof err?.code === 'string' ? err.code : 'EIO';
  const why = DESCRIPTIONS[code] ?? (err instanceof Error ? err.message.replace(/^[A-Z]+: /, '') : String(e));
  return { code, cause: `${why} (${code})` };
}

/** One line for a file system failure at `path`: `path: cause (CODE)` (the error's own path when it has one). */
export function fileErrorLine(path: string, e: unknown): string {
  const own = (e as NodeJS.ErrnoException)?.path;
  return `${typeof own === 'string' && own !== '' ? own : path}: ${fileErrorCause(e).cause}`;
}

/** The error for a path that is not a regular file, in Node's form (code, path, syscall). */
export const notRegularFile = (path: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`ENOTREG: not a regular file, open '${path}'`), { code: 'ENOTREG', path, syscall: 'open' });
