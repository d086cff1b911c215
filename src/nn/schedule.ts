import { ArgumentError } from '../core/errors.js';

/**
 * Linear warmup to `peakLr` over `warmupSteps`, then cosine decay to `minLr` at `totalSteps` (held there after),
 * as Hugging Face's get_cosine_schedule_with_warmup with a floor.
 */
export interface LrSchedule {
  readonly peakLr: number;
  readonly warmupSteps: number;
  readonly totalSteps: number;
  /** Default 0. */
  readonly minLr?: number;
}

/** The learning rate of optimizer step `step` (0-based: the first step is 0). */
export function lrAt(s: LrSchedule, step: number): number {
  if (!(s.peakLr >= 0) || !(s.warmupSteps >= 0) || !(s.totalSteps >= s.warmupSteps)) {
    throw new ArgumentError('lrAt', `need peakLr >= 0 and 0 <= warmupSteps <= totalSteps, got ${JSON.stringify(s)}`);
  }
  const minLr = s.minLr ?? 0;
  if (step < s.warmupSteps) return (s.peakLr * (step + 1)) / s.warmupSteps;
  const span = s.totalSteps - s.warmupSteps;
  const progress = span === 0 ? 1 : Math.min(1, (step - s.warmupSteps) / span);
  return minLr + (s.peakLr - minLr) * 0.5 * (1 + Math.cos(Math.PI * progress));
}
