import { createHash } from 'node:crypto';
import { hostname, totalmem } from 'node:os';

/**
 * The host process (Node): its memory, a hash, and the test-only crash points. The browser build replaces this
 * file with `host.browser.ts` (same exports).
 */

/** This machine's memory in bytes (what a run's memory estimate is checked against by default). */
export const totalMemoryBytes = (): number => totalmem();

export const sha256Hex = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

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
