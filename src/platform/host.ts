import { createHash } from 'node:crypto';
import { readFileSync, readlinkSync } from 'node:fs';
import { homedir, hostname, totalmem } from 'node:os';
import { join } from 'node:path';
import { openRegular } from './files.js';

/**
 * The host process (Node): its memory, a hash (of bytes, or of a file in chunks), and the test-only crash points. The browser build replaces this
 * file with `host.browser.ts` (same exports).
 */

/** This machine's memory in bytes (what a run's memory estimate is checked against by default). */
export const totalMemoryBytes = (): number => totalmem();

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** Bytes per read of `sha256File`: big enough that the hash, not the system calls, sets the pace. */
const HASH_CHUNK_BYTES = 4 * 1024 * 1024;

/**
 * A regular file's size and SHA-256, read a chunk at a time, so a file of any size is hashed in 4 MiB of memory
 * (a whole-file read fails past 2 GiB). Positions are plain numbers, exact up to 2^53. Errors are Node's, with
 * the path (see `openRegular`).
 */
export async function sha256File(path: string): Promise<{ size: number; sha256: string }> {
  const handle = await openRegular(path);
  try {
    const hash = createHash('sha256');
    const chunk = new Uint8Array(HASH_CHUNK_BYTES);
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, size);
      if (bytesRead === 0) break;
      hash.update(chunk.subarray(0, bytesRead));
      size += bytesRead;
    }
    return { size, sha256: hash.digest('hex') };
  } finally {
    await handle.close();
  }
}

/** A name unique to this process, for temporary files beside others' (a write probe). */
export const processTag = (): string => String(process.pid);

/** This process and machine, as a lock file records its holder. */
export const processId = (): number => process.pid;
export const hostName = (): string => hostname();

/** Whether a process of this machine is alive (signal 0 probes without sending; EPERM: alive, not ours). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const crashCounts = new Map<string, number>();

/**
 * Test-only crash points: `RLVR_TEST_CRASH_AT=<name>:<n>` kills the process (SIGKILL, nothing flushed) the n-th
 * time the named point is reached, so a spec can interrupt a save between any two of its writes.
 */
export function crashPoint(name: string): void {
  const spec = process.env.RLVR_TEST_CRASH_AT;
  if (!spec) return;
  const cut = spec.lastIndexOf(':');
  if (spec.slice(0, cut) !== name) return;
  const n = (crashCounts.get(name) ?? 0) + 1;
  crashCounts.set(name, n);
  if (n === Number(spec.slice(cut + 1))) process.kill(process.pid, 'SIGKILL');
}

/** Let the event loop run its pending callbacks (signals, I/O): a loop of settled awaits never does. */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** An environment variable of the process (undefined when unset). */
export const envVar = (name: string): string | undefined => process.env[name];

/** The user's cache directory (XDG_CACHE_HOME, else ~/.cache), where caches that later runs reuse live. */
export const userCacheDir = (): string | null => process.env.XDG_CACHE_HOME || join(homedir(), '.cache');

/**
 * Whether file descriptor `fd` (0-2) was closed when the process started (`rlvr ... >&-`): Node then opens
 * /dev/null in its place read-write, where a shell's `> /dev/null` opens it write-only. Read from /proc (Linux);
 * false where that cannot be read.
 */
export function stdioWasClosed(fd: number): boolean {
  try {
    if (readlinkSync(`/proc/self/fd/${fd}`) !== '/dev/null') return false;
    const flags = /^flags:\s*([0-7]+)/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
    return flags !== null && (Number.parseInt(flags[1]!, 8) & 3) === 2; // O_ACCMODE === O_RDWR
  } catch {
    return false;
  }
}
