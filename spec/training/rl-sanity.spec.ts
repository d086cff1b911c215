/**
 * RL sanity (issue 21, item 1), the correct loop and two broken ones: every objective of the registry reaches 0.9
 * of the optimum on the three easy tasks of `helpers/rl-sanity.ts` within a fixed number of steps, in every seed;
 * a loop with the advantage sign flipped, or one that keeps sampling a stale policy, does not (test-only faults of
 * the trainer, `RlFaults`). RCC and BICC: `rl-sanity-variants.spec.ts`.
 */
import { describe, expect, it } from 'vitest';
import { OBJECTIVE_NAMES } from '../../src/objectives/registry.js';
import { BAR, SEEDS, TASKS, expectLearns, finalReward, type SanityTask } from './helpers/rl-sanity.js';

describe('RL sanity: every objective reaches 0.9 of the optimum on easy tasks, in every seed', () => {
  for (const name of Object.keys(TASKS) as SanityTask[]) {
    for (const objective of OBJECTIVE_NAMES) it(`${name}: ${objective}`, () => expectLearns(name, objective, 'plain'));
  }
});

describe('a broken loop does not reach the bar on the bandit (same budget as above)', () => {
  // Flipped sign: the policy is pushed away from what is rewarded, so the reward falls below chance. Stale policy:
  // every step samples the policy the run started with, so the reward stays near chance whatever the updates do.
  // One seed per objective (the first), to keep the file fast; the correct loop clears the bar in that seed above.
  const faults = [
    ['advantage sign flipped', { flipAdvantageSign: true }],
    ['stale policy sampled', { staleSampler: true }],
  ] as const;
  for (const [fault, f] of faults) {
    for (const objective of OBJECTIVE_NAMES) {
      it(`${fault}: ${objective} misses`, async () => {
        expect(await finalReward('bandit', objective, 'plain', SEEDS[0]!, f)).toBeLessThan(BAR);
      });
    }
  }
});
