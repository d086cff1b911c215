import { NodeOnlyError } from './errors.js';
import type * as Node from './host.js';

/** A page's host (types: host.ts's). It cannot know the machine's memory; it has no files to hash or crash in. */
export const totalMemoryBytes: typeof Node.totalMemoryBytes = () => Number.POSITIVE_INFINITY;

export const sha256Hex: typeof Node.sha256Hex = () => {
  throw new NodeOnlyError('sha256Hex');
};

export const sha256File: typeof Node.sha256File = () => Promise.reject(new NodeOnlyError('sha256File'));

export const processTag: typeof Node.processTag = () => 'page';

export const crashPoint: typeof Node.crashPoint = () => {};

export const processId: typeof Node.processId = () => 0;
export const hostName: typeof Node.hostName = () => 'page';
export const processAlive: typeof Node.processAlive = () => true;

export const yieldToEventLoop: typeof Node.yieldToEventLoop = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A page has no environment. */
export const envVar: typeof Node.envVar = () => undefined;

/** Nor a cache directory: caches stay in memory. */
export const userCacheDir: typeof Node.userCacheDir = () => null;
/** A page has no file descriptors. */
export const stdioWasClosed: typeof Node.stdioWasClosed = () => false;
