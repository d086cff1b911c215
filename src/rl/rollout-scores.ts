import { tidy } from '../core/scope.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import type { SequenceBatch } from './batch.js';
import type { Rollouts } from './sampler.js';
import { scoreLogProbs, type ScoreOptions } from './score.js';

/**
 * The scoring stage of an RL step: every log-prob of the sampled tokens that the update reads besides the
 * current policy's own, from one place and in one shape ([B, C] row-major on the host, 0 where masked), all at
 * the temperature the completions were sampled at.
 */
export interface RolloutScores {
  /**
   * log pi_old: the sampler's own record where the backend is batch-invariant, else the training forward's
   * re-score of the same rows (a GPU picks kernels by shape, so the KV-cache sampler may round otherwise).
   */
  readonly old: Float32Array;
  /** log pi_ref under the frozen reference, or null for a run without one. */
  readonly reference: Float32Array | null;
  /**
   * log pi_old(o | c, q): the sampling policy on BICC's conditioned batch (each row under its group's
   * opposite-class rollouts), or null without BICC. The 'conditioned-old' reading divides by it; the log-ratio record compares it.
   */
  readonly conditionedOld: Float32Array | null;
}

/** The frozen policies a step scores its rollouts under. */
export interface ScoringPolicies {
  /** The policy that sampled the rollouts: pi_old. */
  readonly sampler: TransformerParams;
  /** The KL or RCC reference, or null when the run needs none. */
  readonly reference: TransformerParams | null;
}

/**
 * Score one step's rollouts (and BICC's conditioned batch of them, when given: the same rows and completion
 * block) under the sampling policy and the reference, without a gradient: pi_old is re-scored only where the
 * backend is not batch-invariant, so that the first optimisation step's ratio is exactly 1 on any deterministic
 * backend (TRL re-scores likewise).
 */
export async function scoreRollouts(
  policies: ScoringPolicies,
  config: TransformerConfig,
  rollouts: Rollouts,
  conditioned: SequenceBatch | null,
  opts: Pick<ScoreOptions, 'remat'> = {},
): Promise<RolloutScores> {
  const scoring = { temperature: rollouts.scoringTemperature, remat: opts.remat ?? false };
  const onHost = async (params: TransformerParams, batch: SequenceBatch): Promise<Float32Array> => {
    const logProbs = tidy(() => scoreLogProbs(params, config, batch, scoring));
    const values = Float32Array.from(await logProbs.data());
    logProbs.dispose();
    return values;
  };
  const { sampler, reference } = policies;
  return {
    old: sampler.embed.weight.backend.batchInvariant ? rollouts.sampledLogProbs : await onHost(sampler, rollouts),
    reference: reference ? await onHost(reference, rollouts) : null,
    conditionedOld: conditioned ? await onHost(sampler, conditioned) : null,
  };
}
