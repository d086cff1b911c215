import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { dispose } from '../../src/core/scope.js';
import { STATE_METRIC } from '../../src/training/divergence.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { rlvrSync } from './helpers/cli.js';
import { rejectionOf, useCliBundle } from './helpers/harness.js';

/**
 * A finite weight past about 1.8e19 is no divergence. The check of what an update wrote summed squares in f32,
 * which overflows there: a full fine-tune of a Hub model holding one such weight (finite, loaded without
 * --allow-non-finite-weights) ended with "training diverged: updated_state_sum_sq = Infinity", exit 4. A sum that
 * is not finite is now settled entry by entry; a weight or moment that is NaN or infinite still ends the run.
 */
const bundle = useCliBundle('large-weights');
const HUB = ['--task', 'addition', '--max-completion-length', '8', '--prompts-per-step', '2'];
const RUN = [...HUB, '--num-generations', '2', '--eval-prompts', '4', '--eval-k', '1', '--seed', '1'];

async function trainOn(dir: string, extra: readonly string[]) {
  const cfg = parseTrainArgs(['--model', dir, ...RUN, ...extra]);
  if (E.isLeft(cfg)) throw cfg.left;
  const records: MetricRecord[] = [];
  const result = await train(cfg.right, { backend: new CpuBackend({ threads: 1 }), onRecord: (r) => records.push(r) });
  return { result, records };
}

describe('a finite weight whose square overflows f32 is trained, not called divergence', () => {
  // The final norm's first weight (the policy then samples one token: finite log-probs and gradients), on 2 RL steps.
  for (const weight of [1e20, -1e30]) {
    it(`a weight of ${weight}: both RL steps are taken, the weight stays finite`, async () => {
      const dir = await tinyHubDir({ poison: weight });
      const { result, records } = await trainOn(dir, ['--steps', '2']);
      expect(records.filter((r) => r.phase !== 'eval').map((r) => [r.phase, r.skipped ?? null])).toEqual([
        ['rl', null],
        ['rl', null],
      ]);
      const norm = result.params.finalNorm.dataSync();
      expect(Number.isFinite(norm[0]) && Math.abs(norm[0]!) > 1e19).toBe(true);
      dispose(result.params);
    });
  }

  it('the CLI: exit 0 (it was 4)', async () => {
    const dir = await tinyHubDir({ poison: 1e20 });
    const r = rlvrSync(bundle.path, ['train', '--model', dir, ...RUN, '--steps', '1', '--threads', '1']);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('a NaN written by the update is still divergence, beside the large weight', async () => {
    const dir = await tinyHubDir({ poison: 1e20 });
    const e = await rejectionOf(trainOn(dir, ['--steps', '1', '--learning-rate', '1e308']));
    expect(e).toMatchObject({ name: 'DivergedError', phase: 'rl', step: 1, metric: STATE_METRIC });
  });
});
