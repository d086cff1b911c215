/**
 * The two interventions of the BICC paper, as one RL step applies them between sampling and the update: RCC, an
 * advantage transform (a per-group baseline corrected by the covariance of reward and confidence), and BICC, a
 * batch transform (each rollout scored under its group's opposite-class rollouts). `updatePolicy` takes what they
 * give; the step's record says what they did.
 */
import type { TransformerConfig } from '../nn/transformer.js';
import { groupLayout, groupMean } from '../objectives/groups.js';
import { rccAdvantages, rccBaseline, sequenceDeltas } from '../objectives/rcc.js';
import { selectRows, type SequenceBatch } from '../rl/batch.js';
import { biccInput, conditionBatch } from '../rl/bicc.js';
import type { Rollouts } from '../rl/sampler.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import type { TrainConfig } from './config.js';

export interface Interventions {
  /** RCC's advantages, or null for the objective's own. */
  readonly advantages: readonly number[] | null;
  /** BICC's conditioned batch's rows for a minibatch, or null for the plain layout. */
  readonly scoredBatch: ((rows: readonly number[]) => SequenceBatch) | null;
  /** For the step's record: how far RCC moved the baselines, the share of rows BICC conditioned. */
  readonly record: Readonly<Record<string, number>>;
}

/**
 * RCC and BICC for one step's rollouts, as the config asks (neither: the objective's advantages on the plain
 * batch). `signal` is what the objective learns from (the rewards, or a spec's fault); `rewards` what the record
 * reports.
 */
export function interventions(
  cfg: TrainConfig,
  rollouts: Rollouts,
  rewards: readonly number[],
  signal: readonly number[],
  tokenizer: Tokenizer,
  config: TransformerConfig,
): Interventions {
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
  // BICC (training only): each rollout is scored under [query; opposite-class rollouts of its group] while pi_old
  // and pi_ref stay on the plain context. One conditioned batch per step; minibatches take its rows.
  const cond = cfg.bicc
    ? conditionBatch(biccInput(rollouts, signal), tokenizer, config, {
        contextShare: cfg.biccContextShare,
        threshold: 0.5,
        placement: cfg.biccPlacement,
      })
    : null;
  return {
    advantages: deltas && rccAdvantages(signal, deltas, rollouts.promptIndex),
    scoredBatch: cond && ((rows) => selectRows(cond.batch, rows)),
    record: {
      ...(deltas ? { rcc_baseline_shift: rccBaselineShift(rewards, deltas, rollouts.promptIndex) } : {}),
      ...(cond ? { bicc_conditioned: cond.conditioned.filter(Boolean).length / cond.conditioned.length } : {}),
    },
  };
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
