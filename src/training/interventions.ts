/**
 * The two interventions of the BICC paper, as one RL step applies them between sampling and the update: RCC, an
 * advantage transform (a per-group baseline corrected by the covariance of reward and confidence), and BICC, a
 * batch transform (each rollout scored under its group's opposite-class rollouts). BICC's conditioned batch is
 * built before the scoring stage (`scoreRollouts` scores pi_old on it); what both then give the update is data
 * (`Interventions`), and the step's record says what they did.
 */
import type { TransformerConfig } from '../nn/transformer.js';
import { groupLayout, groupMean } from '../objectives/groups.js';
import { rccAdvantages, rccBaseline, sequenceDeltas } from '../objectives/rcc.js';
import type { SequenceBatch } from '../rl/batch.js';
import { biccInput, conditionBatch, contextLogRatio, type ConditionedBatch } from '../rl/bicc.js';
import type { RolloutScores } from '../rl/rollout-scores.js';
import type { Rollouts } from '../rl/sampler.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import type { TrainConfig } from './config.js';

/**
 * BICC's conditioned batch of a step (training only): each rollout under [opposite-class rollouts of its group;
 * query], or null when the run does not use BICC. `signal` decides the classes (the rewards, or a spec's fault).
 */
export function biccConditioning(
  cfg: TrainConfig,
  rollouts: Rollouts,
  signal: readonly number[],
  tokenizer: Tokenizer,
  config: TransformerConfig,
): ConditionedBatch | null {
  if (!cfg.bicc) return null;
  return conditionBatch(biccInput(rollouts, signal), tokenizer, config, {
    contextShare: cfg.biccContextShare,
    threshold: 0.5,
    placement: cfg.biccPlacement,
    sides: cfg.biccSides,
  });
}

/** What RCC and BICC give the update: which advantages, which sequences the policy is scored on, which pi_old. */
export interface Interventions {
  /** RCC's advantages, or null for the objective's own. */
  readonly advantages: readonly number[] | null;
  /** What the policy is scored on: BICC's conditioned batch under the paper's reading, else the rollouts. */
  readonly sequences: SequenceBatch;
  /**
   * log pi_old [B, C] the ratio divides by: the scored pi_old, except under BICC's 'conditioned-old' reading, where
   * conditioned rows take pi_old under the context (plain rows keep theirs).
   */
  readonly oldLogProbs: Float32Array;
  /**
   * For the step's record: how far RCC moved the baselines; the share of rows BICC conditioned and the per-token
   * log pi_old(o|q) - log pi_old(o|c, q) on them (mean, mean absolute, positive and negative rows).
   */
  readonly record: Readonly<Record<string, number>>;
}

/**
 * RCC and BICC for one step's scored rollouts, as the config asks (neither: the objective's advantages on the
 * plain batch and pi_old as scored). `conditioned` is `biccConditioning`'s batch, whose pi_old `scores` carries;
 * `signal` is what the objective learns from; `rewards` what the record reports.
 */
export function interventions(
  cfg: TrainConfig,
  rollouts: Rollouts,
  scores: RolloutScores,
  conditioned: ConditionedBatch | null,
  rewards: readonly number[],
  signal: readonly number[],
): Interventions {
  const deltas =
    cfg.advantage === 'rcc'
      ? sequenceDeltas(scores.old, scores.reference!, rollouts.completionMask, rollouts.completionLen, cfg.rccDelta)
      : null;
  // The scoring stage scores pi_old on the conditioned batch whenever there is one.
  const bicc = conditioned && { rows: conditioned, old: scores.conditionedOld! };
  const ratio = bicc && contextLogRatio(scores.old, bicc.old, rollouts.completionMask, bicc.rows);
  // With the paper's reading the policy is scored on the conditioned rows and pi_old and pi_ref stay on the plain
  // context; with 'conditioned-old' the policy is scored on the plain rows and pi_old under the context.
  const conditionedOld = cfg.biccRatio === 'conditioned-old';
  return {
    advantages: deltas && rccAdvantages(signal, deltas, rollouts.promptIndex),
    sequences: bicc && !conditionedOld ? bicc.rows.batch : rollouts,
    oldLogProbs: bicc && conditionedOld ? mixRows(scores.old, bicc.old, bicc.rows.conditioned) : scores.old,
    record: {
      ...(deltas ? { rcc_baseline_shift: rccBaselineShift(rewards, deltas, rollouts.promptIndex) } : {}),
      ...(bicc
        ? { bicc_conditioned: bicc.rows.conditioned.filter(Boolean).length / bicc.rows.conditioned.length }
        : {}),
      // Only finite figures: no conditioned row (or no row of a class) leaves its figure out of the record.
      ...(ratio && ratio.tokens > 0
        ? {
            bicc_log_ratio: ratio.mean,
            bicc_abs_log_ratio: ratio.meanAbs,
            bicc_log_mean_ratio: ratio.logMeanRatio,
          }
        : {}),
      ...(ratio && Number.isFinite(ratio.positive) ? { bicc_log_ratio_pos: ratio.positive } : {}),
      ...(ratio && Number.isFinite(ratio.negative) ? { bicc_log_ratio_neg: ratio.negative } : {}),
    },
  };
}

/** Row r of `conditioned` where `use[r]`, else of `plain` ([B, C] each). */
function mixRows(plain: Float32Array, conditioned: Float32Array, use: readonly boolean[]): Float32Array {
  const c = plain.length / use.length;
  const out = Float32Array.from(plain);
  use.forEach((u, r) => {
    if (u) out.set(conditioned.subarray(r * c, (r + 1) * c), r * c);
  });
  return out;
}

/** Mean |b_RCC - mean r| over the step's groups: how far RCC moved the baseline from GRPO's group mean. */
function rccBaselineShift(rewards: readonly number[], deltas: readonly number[], groupIds: readonly number[]): number {
  const groups = groupLayout(groupIds).members;
  const shift = (rows: readonly number[]): number => {
    const r = rows.map((i) => rewards[i]!);
    return Math.abs(
      rccBaseline(
        r,
        rows.map((i) => deltas[i]!),
      ) - groupMean(r),
    );
  };
  return groups.reduce((s, rows) => s + shift(rows), 0) / groups.length;
}
