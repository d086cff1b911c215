/**
 * One RL step of a run: sample G completions per prompt (tokens and their sampled log-probs), verify them, build
 * BICC's conditioned batch, score everything the update divides by in one stage (`scoreRollouts`: pi_old, pi_ref,
 * BICC's conditioned pi_old), apply RCC and BICC (`interventions.ts`), update the policy on one `PolicyBatch`
 * (`policy-update.ts`), record the step, and warn when no group carried a signal.
 */
import { stopGradient } from '../core/transforms.js';
import { lrAt } from '../nn/schedule.js';
import { groupStats } from '../objectives/groups.js';
import { scoreRollouts } from '../rl/rollout-scores.js';
import { sampleRollouts } from '../rl/sampler.js';
import { sampleProblems } from '../tasks/task.js';
import type { TrainConfig } from './config.js';
import { readMetrics, type MetricRecord } from './metrics.js';
import { updatePolicy, type AdamWSettings, type PolicyBatch } from './policy-update.js';
import { biccConditioning, interventions } from './interventions.js';
import {
  emit,
  adoptOrSkip,
  donatesUpdates,
  guardUpdate,
  updatedStateCheck,
  withoutStateCheck,
  type Run,
  type TrainHooks,
  type TrainWarning,
  type RlFaults,
} from './run.js';
import { STATE_METRIC } from './divergence.js';

/** RL steps in a row without a group of mixed rewards before the trainer warns. */
export const NO_SIGNAL_WARN_STEPS = 5;

/**
 * The mean per-token log-ratio, plain pi_old over conditioned pi_old, beyond which the trainer says that BICC's
 * context is not read as the same task. A policy that has learned to read context stays within about 1 nat on the
 * addition task (docs/results/bicc-context/); one that has never seen a prefix is at 8.5 to 11.5.
 */
export const BICC_CONTEXT_WARN_NATS = 2;

function rlSettings(cfg: TrainConfig): (step: number) => AdamWSettings {
  const totalUpdates =
    cfg.steps * cfg.numIterations * Math.ceil(cfg.promptsPerStep / (cfg.groupsPerMinibatch ?? cfg.promptsPerStep));
  return (step) => ({
    lr: lrAt(
      { peakLr: cfg.learningRate, warmupSteps: Math.min(cfg.warmupSteps, totalUpdates), totalSteps: totalUpdates },
      step,
    ),
    maxGradNorm: cfg.maxGradNorm,
    weightDecay: cfg.weightDecay,
  });
}

export async function rlStep(run: Run, hooks: TrainHooks, faults: RlFaults = {}): Promise<void> {
  const { cfg } = run;
  run.finalEval = null; // a result after RL holds for the step it was taken at only
  const t0 = performance.now();
  const problems = sampleProblems(run.task, cfg.promptsPerStep, run.rng);
  if (faults.staleSampler) run.stale ??= stopGradient(run.params);
  const samplingPolicy = run.stale ?? run.params;
  const rollouts = await sampleRollouts(
    samplingPolicy,
    run.config,
    run.tokenizer,
    problems.map((p) => p.prompt),
    run.rng,
    {
      groupSize: cfg.numGenerations,
      maxNewTokens: cfg.maxCompletionLength,
      temperature: cfg.temperature,
      topP: cfg.topP,
    },
  );
  const rewards = rollouts.completions.map((c, r) => run.task.verify(c, problems[rollouts.promptIndex[r]!]!));
  // What the objective learns from: the rewards, unless a spec flips the signal's sign.
  const signal = faults.flipAdvantageSign ? reflected(rewards) : rewards;
  const { promptIndex, completions } = rollouts;
  hooks.onRollouts?.({
    step: run.at.step + 1,
    prompts: problems.map((p) => p.prompt),
    promptIndex,
    completions,
    rewards,
  });
  const conditioned = biccConditioning(cfg, rollouts, signal, run.tokenizer, run.config);
  const scores = await scoreRollouts(
    { sampler: samplingPolicy, reference: run.needsReference ? run.reference : null },
    run.config,
    rollouts,
    conditioned?.batch ?? null,
    { remat: cfg.gradientCheckpointing },
  );
  const applied = interventions(cfg, rollouts, scores, conditioned, rewards, signal);
  warnContextNotRead(run, hooks, applied.record);
  const batch: PolicyBatch = {
    sequences: applied.sequences,
    oldLogProbs: applied.oldLogProbs,
    refLogProbs: scores.reference,
    rewards: signal,
    advantages: applied.advantages,
    groupIds: promptIndex,
    groupSize: rollouts.groupSize,
    completionLengths: rollouts.completionLengths,
    temperature: rollouts.scoringTemperature,
  };
  const sampledAt = performance.now();
  const settings = rlSettings(cfg);
  const rlStepIndex = run.at.step;
  const result = guardUpdate(run, () =>
    updatePolicy(
      { params: run.params, opt: run.opt },
      run.config,
      batch,
      {
        objective: run.objective,
        progress: { step: rlStepIndex, totalSteps: cfg.steps },
        numIterations: cfg.numIterations,
        groupsPerMinibatch: cfg.groupsPerMinibatch ?? cfg.promptsPerStep,
        maxCompletionLength: cfg.maxCompletionLength,
        donate: donatesUpdates(cfg),
      },
      settings,
      run.rng,
      { dropoutRng: run.params.lora?.dropout ? run.rng : undefined, remat: cfg.gradientCheckpointing },
    ),
  );
  const updated = result.params !== run.params;
  const read = await readMetrics(
    updated ? { ...result.metrics, [STATE_METRIC]: updatedStateCheck(result) } : result.metrics,
  );
  const skipped = result.skipped ?? (updated ? await adoptOrSkip(run, 'rl', read, result) : null);
  const metrics = withoutStateCheck(read);
  run.at.step++;
  const seconds = (performance.now() - t0) / 1000;
  const stats = groupStats(rewards, rollouts.promptIndex);
  const reward = rewards.reduce((s, x) => s + x, 0) / rewards.length;
  warnWithoutSignal(
    run,
    hooks,
    rewards,
    stats.every((s) => s.rewardStd === 0),
  );
  const sampledTokens = rollouts.completionLengths.reduce((s, x) => s + x, 0);
  const record: MetricRecord = {
    phase: 'rl',
    step: run.at.step,
    // The objective's metrics are its last minibatch's; the step's own reward over all rollouts comes after them.
    ...metrics,
    reward,
    groups_mixed: stats.filter((s) => s.rewardStd > 0).length / stats.length,
    // What the two interventions did this step, so a run shows they acted.
    ...applied.record,
    ...(skipped ? { skipped } : {}),
    lr: settings(run.opt.step - 1).lr,
    seconds,
    sample_seconds: (sampledAt - t0) / 1000,
    tokens_per_s: (sampledTokens + result.tokensScored) / seconds,
  };
  emit(run, record, hooks);
  hooks.onProgress?.({ phase: 'rl', step: run.at.step, total: cfg.steps, record });
}

/** Say once per run when the policy scores completions after BICC's context as another distribution. */
function warnContextNotRead(run: Run, hooks: TrainHooks, record: Readonly<Record<string, number>>): void {
  const ratio = record.bicc_log_ratio;
  if (run.biccContextWarned || ratio === undefined || Math.abs(ratio) <= BICC_CONTEXT_WARN_NATS) return;
  run.biccContextWarned = true;
  const step = run.at.step + 1;
  const message =
    `RL step ${step}: the policy scores completions after BICC's inserted context ${ratio.toFixed(1)} nats per ` +
    `token ${ratio > 0 ? 'below' : 'above'} the plain prompt (bound ${BICC_CONTEXT_WARN_NATS}): it does not read the ` +
    'context as the same task, so BICC changes the objective rather than sharpening it; a warm-start with ' +
    '--warm-start-context-share (e.g. 0.5) teaches it to.';
  const warning: TrainWarning = { kind: 'bicc-context', step, steps: 1, reward: Number.NaN, logRatio: ratio, message };
  if (hooks.onWarning) hooks.onWarning(warning);
  else console.warn(`warning: ${message}`);
}

/** Each reward r as (max + min) - r: centred rewards change sign, their spread and the range stay (RlFaults). */
function reflected(rewards: readonly number[]): number[] {
  const [lo, hi] = [Math.min(...rewards), Math.max(...rewards)];
  return rewards.map((r) => hi + lo - r);
}

/** Count RL steps in a row without a mixed group; warn once when a streak reaches NO_SIGNAL_WARN_STEPS. */
function warnWithoutSignal(run: Run, hooks: TrainHooks, rewards: readonly number[], noSignal: boolean): void {
  if (!noSignal) {
    run.noSignal = null;
    return;
  }
  const [lo, hi] = [Math.min(...rewards), Math.max(...rewards)];
  const sum = rewards.reduce((s, x) => s + x, 0) / rewards.length;
  const was = run.noSignal;
  const streak = was
    ? { steps: was.steps + 1, reward: was.reward + sum, lo: Math.min(was.lo, lo), hi: Math.max(was.hi, hi) }
    : { steps: 1, reward: sum, lo, hi };
  run.noSignal = streak;
  if (streak.steps !== NO_SIGNAL_WARN_STEPS) return;
  const n = streak.steps;
  const mean = streak.reward / n;
  const step = run.at.step; // already counts this step
  const why =
    streak.hi <= 0
      ? 'no rollout earned a reward: the task is too hard for the policy as it samples. A longer warm-start, a ' +
        'larger group (numGenerations), more prompts per step or another sampling temperature can give the groups a mix'
      : streak.lo === streak.hi
        ? 'every rollout earned the same reward: the task is solved at this temperature (or the reward is constant)'
        : 'each group agreed with itself (some all rewarded, others all not): the policy is deterministic on these ' +
          'prompts; a higher temperature or a larger group (numGenerations) can give the groups a mix';
  const message =
    `RL step ${step}: no learning signal for ${n} steps in a row (every group's rewards were equal, ` +
    `mean reward ${mean.toFixed(3)}), so every advantage is zero and the policy does not change; ${why}.`;
  const warning: TrainWarning = { kind: 'no-signal', step, steps: n, reward: mean, message };
  if (hooks.onWarning) hooks.onWarning(warning);
  else console.warn(`warning: ${message}`);
}
