import type * as E from 'fp-ts/lib/Either.js';
import type { Tensor } from '../core/tensor.js';
import type { RolloutBatch } from './batch.js';
import type { ConfigError } from './errors.js';

/** Scalar metric tensors, detached from every tape (safe to return as `valueAndGrad`'s aux and read asynchronously). */
export type Metrics = Readonly<Record<string, Tensor>>;

/** What every objective returns: the loss to minimise (a scalar tensor; the objective J is `-loss`) and its metrics. */
export type ObjectiveResult = { readonly loss: Tensor; readonly metrics: Metrics };

/** Where training is; only schedules (ConSPO's margin, Eq. 16) read it. lambda = step / totalSteps, clamped to [0, 1]. */
export interface TrainingProgress {
  readonly step: number;
  readonly totalSteps: number;
}

/** An objective bound to nothing: batch, config and progress in, loss and metrics out. */
export type ObjectiveFn<C> = (batch: RolloutBatch, config: C, progress?: TrainingProgress) => ObjectiveResult;

/**
 * What an objective's config parser takes: a partial record, keys camelCase (`epsilonHigh`) or TRL/verl snake_case
 * (`epsilon_high`, `loss_type`, ...); unknown keys are errors (a typo must not silently fall back to a default);
 * `undefined` means "use the default".
 */
export type ConfigInput = Readonly<Record<string, unknown>>;

/**
 * An objective as a trainer or CLI picks it by name (`registry.ts`): its config parser and defaults, its loss, and
 * what it needs from the loop, so that no caller names objectives.
 */
export interface ObjectiveDefinition<C> {
  readonly name: string;
  /** One line for usage texts. */
  readonly summary: string;
  readonly defaults: C;
  readonly parse: (input?: ConfigInput) => E.Either<ConfigError, C>;
  readonly loss: ObjectiveFn<C>;
  /** Whether the loss weighs rollouts by advantages (so precomputed ones, such as RCC's, apply). */
  readonly usesAdvantages: boolean;
  /** Whether it contrasts each group's positives with its negatives (single-class groups teach it nothing). */
  readonly contrastive: boolean;
  /** Whether, under this config, the loss has a KL term to the reference policy (it reads `refLogProbs`). */
  readonly klToReference: (config: C) => boolean;
}
