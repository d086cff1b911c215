import { RlvrError } from '../core/errors.js';

/**
 * A run stopped because it was asked to (`TrainOptions.signal` aborted: the CLI aborts it on SIGINT and SIGTERM).
 * The trainer stops at the next step boundary, writes its checkpoint if it has unsaved steps, and throws this:
 * where it stopped and where the checkpoint is (null without --output), so the run can be resumed.
 */
export class InterruptedError extends RlvrError {
  constructor(
    readonly reason: string,
    readonly phase: 'warmstart' | 'rl',
    readonly step: number,
    readonly checkpoint: string | null,
  ) {
    super(
      `interrupted by ${reason} at ${phase} step ${step}: ` +
        (checkpoint
          ? `checkpoint saved in ${checkpoint} (continue with --resume ${checkpoint})`
          : 'nothing saved (no --output)'),
    );
  }
}

/** The reason a signal was aborted with, as a word ('SIGTERM'; 'aborted' when none was given). */
export const abortReason = (signal: AbortSignal): string =>
  typeof signal.reason === 'string'
    ? signal.reason
    : signal.reason instanceof Error
      ? signal.reason.message
      : 'aborted';
