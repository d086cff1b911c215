/**
 * RL sanity (issue 21, item 1) with RCC (objectives that weigh rollouts by advantages) and BICC (every objective;
 * the trainer's before-query placement): the bandit and the prompt-dependent task of `helpers/rl-sanity.ts`, with
 * the same budgets and bar as `rl-sanity.spec.ts`.
 *
 * Two BICC combinations miss the bar, and are stated with `it.fails` (the spec asserts that some seed still misses,
 * so a change that fixes them fails here and should move them to the passing set). Both come from BICC's ratio,
 * pi_theta(o | query + opposite traces) / pi_old(o | query) (pi_old stays on the plain context, as the paper
 * defines it), which differs from 1 before any update: GSPO clips its sequence ratio to [1 - 3e-4, 1 + 4e-4], so
 * nearly every conditioned rollout is clipped and passes no gradient; DisCO's squared-hinge constraint on
 * KL(pi_old || pi_theta) (beta 1e3, delta 1e-4) reads that difference as policy movement and pulls against it.
 * Measured: GSPO + BICC 0.969, 0.744, 0.650 (bandit) and 0.412, 0.650, 0.625 (prompt); DisCO + BICC 0.813,
 * 0.806, 0.594 (prompt).
 * RCC and BICC are not run on the two-token task: there some seeds miss the bar for most objectives (RCC: 0.53 to
 * 0.97; BICC: 0.03 to 0.99, see docs/results/rl-sanity.md), a finding rather than a property to assert.
 */
import { describe, expect, it } from 'vitest';
import { OBJECTIVES, OBJECTIVE_NAMES, type ObjectiveName } from '../../src/objectives/registry.js';
import { BAR, SEEDS, expectLearns, finalReward, type SanityTask } from './helpers/rl-sanity.js';

const ADVANTAGE_OBJECTIVES = OBJECTIVE_NAMES.filter((n) => OBJECTIVES[n].usesAdvantages);
const BICC_MISSES: readonly (readonly [SanityTask, ObjectiveName])[] = [
  ['bandit', 'gspo'],
  ['prompt', 'gspo'],
  ['prompt', 'disco'],
];
const misses = (name: SanityTask, objective: ObjectiveName): boolean =>
  BICC_MISSES.some(([t, o]) => t === name && o === objective);

describe('RL sanity with RCC', () => {
  for (const name of ['bandit', 'prompt'] as const) {
    for (const objective of ADVANTAGE_OBJECTIVES)
      it(`${name}: ${objective} + RCC`, () => expectLearns(name, objective, 'rcc'));
  }
});

describe('RL sanity with BICC', () => {
  for (const name of ['bandit', 'prompt'] as const) {
    for (const objective of OBJECTIVE_NAMES) {
      if (misses(name, objective))
        it.fails(`${name}: ${objective} + BICC misses in some seed (see above)`, () =>
          expectLearns(name, objective, 'bicc'));
      else it(`${name}: ${objective} + BICC`, () => expectLearns(name, objective, 'bicc'));
    }
  }
});

// The defect BICC's placement fixes: with the traces after the query, the scored completion follows a separator, a
// context the sampler never produces, and what is learned there does not carry over to the prompt-dependent
// answer the policy samples (it stays near the 0.5 of a policy that ignores the prompt).
describe('BICC with the traces after the query (the layout before issue 21)', () => {
  it('misses the prompt-dependent task in every seed (GRPO)', async () => {
    for (const seed of SEEDS) expect(await finalReward('prompt', 'grpo', 'bicc-after-query', seed)).toBeLessThan(BAR);
  });
});
