import { RlvrError } from '../core/errors.js';

/**
 * A step produced a non-finite loss, gradient norm, or updated weights or moments. With `onNonFinite: 'stop'` (the default) the run ends
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

/**
 * The name under which a step reads the sum of squares of the weights and moments its update wrote
 * (`updatedStateCheck` in run.ts); checked like the loss, never written to a metric record.
 */
export const STATE_METRIC = 'updated_state_sum_sq';

/** The first of the watched metrics (loss, grad_norm, then the updated state's sum of squares) that is not finite. */
export function firstNonFinite(metrics: Readonly<Record<string, number | string>>): [string, number] | null {
  for (const name of ['loss', 'grad_norm', STATE_METRIC]) {
    const v = metrics[name];
    if (typeof v === 'number' && !Number.isFinite(v)) return [name, v];
  }
  return null;
}
