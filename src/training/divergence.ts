import { RlvrError } from '../core/errors.js';

/**
 * A step produced a non-finite loss or gradient norm. With `onNonFinite: 'stop'` (the default) the run ends
 * with this error before anything is saved, so the last checkpoint on disk is the last good one; with 'skip'
 * the update is dropped (parameters and moments stay as before the step) and the step is recorded as skipped.
 */
export class DivergedError extends RlvrError {
  constructor(
    readonly phase: 'warmstart' | 'rl',
    readonly step: number,
    readonly metric: string,
    readonly value: number,
  ) {
    super(
      `training diverged: ${metric} = ${value} at ${phase} step ${step}; the last checkpoint saved before it is kept`,
    );
  }
}

/** The first of the watched metrics (loss, then grad_norm) that is not finite. */
export function firstNonFinite(metrics: Readonly<Record<string, number | string>>): [string, number] | null {
  for (const name of ['loss', 'grad_norm']) {
    const v = metrics[name];
    if (typeof v === 'number' && !Number.isFinite(v)) return [name, v];
  }
  return null;
}
