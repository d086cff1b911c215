import { NodeOnlyError } from './errors.js';
import type * as Node from './files.js';

export type { FileHandle } from './files.js';

/** A page has no files: each of Node's functions throws `NodeOnlyError` naming itself (types: files.ts's). */
const nodeOnly =
  (name: string) =>
  (..._args: unknown[]): never => {
    throw new NodeOnlyError(name);
  };
const nodeOnlyAsync =
  (name: string) =>
  (..._args: unknown[]): Promise<never> =>
    Promise.reject(new NodeOnlyError(name));

export const access: typeof Node.access = nodeOnlyAsync('access');
export const copyFile: typeof Node.copyFile = nodeOnlyAsync('copyFile');
export const link: typeof Node.link = nodeOnlyAsync('link');
export const lstat: typeof Node.lstat = nodeOnlyAsync('lstat');
export const mkdir: typeof Node.mkdir = nodeOnlyAsync('mkdir');
export const open: typeof Node.open = nodeOnlyAsync('open');
export const readdir: typeof Node.readdir = nodeOnlyAsync('readdir');
export const readFile: typeof Node.readFile = nodeOnlyAsync('readFile');
export const readlink: typeof Node.readlink = nodeOnlyAsync('readlink');
export const realpath: typeof Node.realpath = nodeOnlyAsync('realpath');
export const rename: typeof Node.rename = nodeOnlyAsync('rename');
export const rm: typeof Node.rm = nodeOnlyAsync('rm');
export const stat: typeof Node.stat = nodeOnlyAsync('stat');
export const symlink: typeof Node.symlink = nodeOnlyAsync('symlink');
export const truncate: typeof Node.truncate = nodeOnlyAsync('truncate');
export const unlink: typeof Node.unlink = nodeOnlyAsync('unlink');
export const writeFile: typeof Node.writeFile = nodeOnlyAsync('writeFile');
export const openRegular: typeof Node.openRegular = nodeOnlyAsync('openRegular');
export const readRegularFile: typeof Node.readRegularFile = nodeOnlyAsync(
  'readRegularFile',
) as typeof Node.readRegularFile;
export const isDirectFile: typeof Node.isDirectFile = nodeOnlyAsync('isDirectFile');
export const appendFileSync: typeof Node.appendFileSync = nodeOnly('appendFileSync');
export const writeSync: typeof Node.writeSync = nodeOnly('writeSync');
export const makeDirectories: typeof Node.makeDirectories = nodeOnlyAsync('makeDirectories');
export const makeDirectoriesSync: typeof Node.makeDirectoriesSync = nodeOnly('makeDirectoriesSync');
export const basename: typeof Node.basename = nodeOnly('basename');
export const dirname: typeof Node.dirname = nodeOnly('dirname');
export const join: typeof Node.join = nodeOnly('join');
export const resolve: typeof Node.resolve = nodeOnly('resolve');
export const sep: typeof Node.sep = '/';
