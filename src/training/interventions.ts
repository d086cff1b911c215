/**
 * The two interventions of the BICC paper, as one RL step applies them between sampling and the update: RCC, an
 * advantage transform (a per-group baseline corrected by the covariance of reward and confidence), and BICC, a
 * batch transform (each rollout scored under its group's opposite-class rollouts). What they give the update is
 * data (`Interventions`); the step's record says what they did.
 */
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import { groupLayout, groupMean } from '../objectives/groups.js';
import { rccAdvantages, rccBaseline, sequenceDeltas } from '../objectives/rcc.js';
import type { SequenceBatch } from '../rl/batch.js';
import { biccInput, conditionBatch, conditionedOldLogProbs, contextLogRatio } from '../rl/bicc.js';
import type { Rollouts } from '../rl/sampler.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import type { TrainConfig } from './config.js';

/** What RCC and BICC give the update: which advantages, which sequences the policy is scored on, which pi_old. */
export interface Interventions {
  /** RCC's advantages, or null for the objective's own. */
  readonly advantages: readonly number[] | null;
  /** What the policy is scored on: BICC's conditioned batch under the paper's reading, else the rollouts. */
  readonly sequences: SequenceBatch;
  /**
   * log pi_old [B, C] the ratio divides by: the rollouts', except under BICC's 'conditioned-old' reading, where
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
 * RCC and BICC for one step's rollouts, as the config asks (neither: the objective's advantages on the plain
 * batch). `signal` is what the objective learns from (the rewards, or a spec's fault); `rewards` what the record
 * reports.
 */
export async function interventions(
  cfg: TrainConfig,
  rollouts: Rollouts,
  rewards: readonly number[],
  signal: readonly number[],
  tokenizer: Tokenizer,
  config: TransformerConfig,
  params: TransformerParams,
): Promise<Interventions> {
  const deltas =
    cfg.advantage === 'rcc'
      ? sequenceDeltas(
          rollouts.oldLogProbs,
          rollouts.refLogProbs!,
          rollouts.completionMask,
          rollouts.completionLen,
          cfg.rccDelta,
        )
      : null;
  // BICC (training only): each rollout is scored under [opposite-class rollouts of its group; query]. One
  // conditioned batch per step; with the paper's reading minibatches take its rows and pi_old and pi_ref stay on
  // the plain context; with 'conditioned-old' the policy is scored on the plain rows and pi_old under the context.
  const cond = cfg.bicc
    ? conditionBatch(biccInput(rollouts, signal), tokenizer, config, {
        contextShare: cfg.biccContextShare,
        threshold: 0.5,
        placement: cfg.biccPlacement,
        sides: cfg.biccSides,
      })
    : null;
  // The sampling policy under the context, once per step: what the 'conditioned-old' reading divides by, and what
  // the log-ratio record compares with the plain pi_old under either reading.
  const condOld = cond
    ? await conditionedOldLogProbs(params, config, cond, {
        temperature: rollouts.scoringTemperature,
        remat: cfg.gradientCheckpointing,
      })
    : null;
  const ratio = cond && condOld && contextLogRatio(rollouts.oldLogProbs, condOld, rollouts.completionMask, cond);
  const conditionedOld = cfg.biccRatio === 'conditioned-old';
  return {
    advantages: deltas && rccAdvantages(signal, deltas, rollouts.promptIndex),
    sequences: cond && !conditionedOld ? cond.batch : rollouts,
    oldLogProbs:
      cond && condOld && conditionedOld
        ? mixRows(rollouts.oldLogProbs, condOld, cond.conditioned)
        : rollouts.oldLogProbs,
    record: {
      ...(deltas ? { rcc_baseline_shift: rccBaselineShift(rewards, deltas, rollouts.promptIndex) } : {}),
      ...(cond ? { bicc_conditioned: cond.conditioned.filter(Boolean).length / cond.conditioned.length } : {}),
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
