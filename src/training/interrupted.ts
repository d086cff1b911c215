import { RlvrError } from '../core/errors.js';
import { yieldToEventLoop } from '../platform/host.js';

/**
 * A run stopped because it was asked to (`TrainOptions.signal` aborted: the CLI aborts it on SIGINT and SIGTERM).
 * The trainer stops at the next step boundary, writes its checkpoint if it has unsaved steps, and throws this:
 * where it stopped and where the checkpoint is (null without --output), so the run can be resumed.
 */
export class InterruptedError extends RlvrError {
  constructor(
    readonly reason: string,
    readonly phase: 'setup' | 'warmstart' | 'rl',
    readonly step: number,
    readonly checkpoint: string | null,
  ) {
    super(
      `interrupted by ${reason} ${phase === 'setup' ? 'before the first step' : `at ${phase} step ${step}`}: ` +
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

/**
 * For a long loop of setup (reading or checking a dataset's rows, before the first step): a function to await
 * once per item that, every `everyMs` of work, yields to the event loop so a signal can arrive, and throws an
 * `InterruptedError` (phase 'setup', nothing saved) once `signal` is aborted. Without it the loop holds the
 * thread and a signal waits for its end (exit 5 came 99-123 s after SIGTERM).
 */
export function setupPoll(signal: AbortSignal | undefined, everyMs = 50): () => Promise<void> {
  let next = performance.now() + everyMs;
  return async () => {
    if (signal === undefined || performance.now() < next) return;
    await yieldToEventLoop();
    next = performance.now() + everyMs;
    if (signal.aborted) throw new InterruptedError(abortReason(signal), 'setup', 0, null);
  };
}
