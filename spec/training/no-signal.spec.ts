/**
 * The trainer warns when RL has no signal (issue 21, item 3): every group's rewards equal, so every advantage is
 * zero, for NO_SIGNAL_WARN_STEPS steps in a row; once per streak, and a step with a mixed group ends the streak.
 */
import { describe, expect, it } from 'vitest';
import { additionTask, NO_SIGNAL_WARN_STEPS, train, withReward, type TrainWarning } from '../../src/index.js';
import { tinyRun } from './helpers/tiny-run.js';

/** A run of `steps` RL steps whose reward is `reward(rlStep, call)` (rlStep 1-based; 0 during evaluations). */
async function warningsOf(
  steps: number,
  reward: (rlStep: number, call: number) => number,
): Promise<{ warnings: TrainWarning[]; mixed: number[] }> {
  let done = 0;
  let inRl = false;
  let call = 0;
  const task = withReward(additionTask(), () => reward(inRl ? done + 1 : 0, call++));
  const warnings: TrainWarning[] = [];
  const mixed: number[] = [];
  await train(tinyRun({ warmStartSteps: 1, steps, objective: 'grpo' }), {
    task,
    onWarning: (w) => warnings.push(w),
    onRollouts: () => {
      inRl = false; // rewards of this step are in; the evaluation after RL must not count as a step
    },
    onRecord: (r) => {
      if (r.phase === 'rl') {
        done = r.step;
        mixed.push(Number(r.groups_mixed));
      }
      if (r.phase === 'eval' && r.label === 'after-warmstart') inRl = true;
      if (r.phase === 'rl' && r.step < steps) inRl = true;
    },
  });
  return { warnings, mixed };
}

describe('the no-signal warning', () => {
  it('warns once, at the fifth step in a row without a mixed group, that nothing was rewarded', async () => {
    expect(NO_SIGNAL_WARN_STEPS).toBe(5);
    const { warnings, mixed } = await warningsOf(8, () => 0);
    expect(mixed.every((m) => m === 0)).toBe(true);
    expect(warnings.map((w) => [w.kind, w.step, w.steps, w.reward])).toEqual([['no-signal', 5, 5, 0]]);
    expect(warnings[0]!.message).toMatch(/no learning signal for 5 steps in a row/);
    expect(warnings[0]!.message).toMatch(/no rollout earned a reward/);
  });

  it('says a task whose every rollout is rewarded is solved', async () => {
    const { warnings } = await warningsOf(5, (step) => (step > 0 ? 1 : 0));
    expect(warnings.map((w) => [w.step, w.reward])).toEqual([[5, 1]]);
    expect(warnings[0]!.message).toMatch(/solved/);
  });

  it('a step with a mixed group ends the streak: steps 1-4 and 6-10 silent, step 5 mixed, warned at 10', async () => {
    // Step 5 alternates 1, 0 across rollouts, so its groups (4 rollouts each) are mixed; every other step gives 0.
    const { warnings, mixed } = await warningsOf(11, (step, call) => (step === 5 ? call % 2 : 0));
    expect(mixed.map((m) => m > 0)).toEqual(Array.from({ length: 11 }, (_, i) => i + 1 === 5));
    expect(warnings.map((w) => w.step)).toEqual([10]);
  });

  it('without a hook it goes to console.warn', async () => {
    const seen: string[] = [];
    const original = console.warn;
    console.warn = (m: string) => seen.push(m);
    try {
      await train(tinyRun({ warmStartSteps: 1, steps: 5 }), { task: withReward(additionTask(), () => 0) });
    } finally {
      console.warn = original;
    }
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatch(/^warning: RL step 5: no learning signal/);
  });
});
