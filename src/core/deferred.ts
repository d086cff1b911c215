import type { RlvrError } from './errors.js';

/**
 * Checks that an asynchronous device answers later (debug-mode index range checks on WebGPU). A failure is
 * kept, not thrown from a detached promise: the next op or the next `data()` throws it, so it never passes
 * silently and never crashes the process as an unhandled rejection.
 */
const pending = new Set<Promise<void>>();
let failure: RlvrError | null = null;

/** Register a check; `run` resolves to an error to report, or null. */
export function deferCheck(run: Promise<RlvrError | null>): void {
  const p: Promise<void> = run.then(
    (err) => {
      failure ??= err;
    },
    (e: unknown) => {
      failure ??= e as RlvrError;
    },
  );
  pending.add(p);
  void p.finally(() => pending.delete(p));
}

/** Throw (once) a failure already reported. Called by every op. */
export function throwDeferredFailure(): void {
  if (!failure) return;
  const e = failure;
  failure = null;
  throw e;
}

/** Wait for every outstanding check, then throw the first failure. Called before every read. */
export async function settleDeferredChecks(): Promise<void> {
  while (pending.size > 0) await Promise.all([...pending]);
  throwDeferredFailure();
}
