import { NodeOnlyError } from './errors.js';
import type * as Node from './files.js';

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
export const mkdir: typeof Node.mkdir = nodeOnlyAsync('mkdir');
export const readFile: typeof Node.readFile = nodeOnlyAsync('readFile');
export const rename: typeof Node.rename = nodeOnlyAsync('rename');
export const writeFile: typeof Node.writeFile = nodeOnlyAsync('writeFile');
export const appendFileSync: typeof Node.appendFileSync = nodeOnly('appendFileSync');
export const mkdirSync: typeof Node.mkdirSync = nodeOnly('mkdirSync');
export const dirname: typeof Node.dirname = nodeOnly('dirname');
export const join: typeof Node.join = nodeOnly('join');
export const resolve: typeof Node.resolve = nodeOnly('resolve');
