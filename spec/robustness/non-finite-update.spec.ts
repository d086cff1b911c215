import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { treeLeaves } from '../../src/core/pytree.js';
import { loadCheckpoint } from '../../src/io/checkpoint.js';
import type { TrainConfig } from '../../src/training/config.js';
import { STATE_METRIC } from '../../src/training/divergence.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';
import { rejectionOf, tempDir, tinyGrpoRun, useCliBundle } from './helpers/harness.js';

/**
 * An update that makes the weights non-finite is divergence, not a NaN model saved with exit 0: a learning rate
 * of 1e308 once ended a run with exit 0 and a checkpoint of NaN weights. Through `train()` and the CLI.
 */
const bundle = useCliBundle('non-finite-update');
const tmp = (name: string): string => tempDir(`nonfinite-${name}`);

async function allFinite(checkpoint: string): Promise<boolean> {
  const ck = await loadCheckpoint(checkpoint, { allowNonFinite: true })();
  if (E.isLeft(ck)) throw ck.left;
  return treeLeaves(ck.right.params).every((t) => t.dataSync().every(Number.isFinite));
}

function loraOf(): NonNullable<TrainConfig['lora']> {
  return { r: 2, alpha: 4, dropout: 0, targetModules: ['q_proj', 'v_proj'], useRslora: false };
}

describe('an update that makes the weights non-finite is divergence, not a NaN model saved with exit 0', () => {
  it('learningRate 1e308: DivergedError at RL step 1 naming the updated state; no NaN weights saved', async () => {
    const dir = tmp('nan-model');
    const e = await rejectionOf(train(tinyGrpoRun({ learningRate: 1e308, outputDir: dir })));
    expect(e).toMatchObject({ name: 'DivergedError', phase: 'rl', step: 1, metric: STATE_METRIC });
    const ck = join(dir, 'checkpoint');
    if (existsSync(ck)) expect(await allFinite(ck)).toBe(true);
  });

  it("with onNonFinite 'skip' the update is dropped and recorded; the run ends with finite weights", async () => {
    const records: MetricRecord[] = [];
    const dir = tmp('nan-skip');
    const result = await train(tinyGrpoRun({ learningRate: 1e308, onNonFinite: 'skip', outputDir: dir }), {
      onRecord: (r) => records.push(r),
    });
    const rl = records.filter((r) => r.phase === 'rl');
    expect(rl).toHaveLength(1);
    expect(rl[0]!.skipped).toMatch(new RegExp(`^${STATE_METRIC} = (NaN|-?Infinity)$`));
    for (const t of treeLeaves(result.params)) expect(t.dataSync().every(Number.isFinite)).toBe(true);
    expect(await allFinite(join(dir, 'checkpoint'))).toBe(true);
  });

  it('under LoRA the adapters (what the update wrote) are checked', async () => {
    const e = await rejectionOf(train(tinyGrpoRun({ learningRate: 1e308, lora: { ...loraOf() } })));
    expect(e).toMatchObject({ name: 'DivergedError', phase: 'rl', step: 1, metric: STATE_METRIC });
  });

  it('the check only reads: no record carries it, and a sound run is unchanged by it', async () => {
    const records: MetricRecord[] = [];
    await train(tinyGrpoRun({ steps: 2 }), { onRecord: (r) => records.push(r) });
    expect(records.some((r) => r.phase === 'rl')).toBe(true);
    for (const r of records) {
      expect(r).not.toHaveProperty(STATE_METRIC);
      expect(r).not.toHaveProperty('skipped');
    }
  });

  it('the CLI exits 4 (diverged) for --learning-rate 1e308, where it exited 0 with a NaN checkpoint', () => {
    const dir = join(tmp('nan-cli'), 'out');
    const r = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, { '--learning-rate': '1e308' }), '--output', dir]);
    expect(r.status).toBe(4);
    expect(r.stderr).toMatch(/training diverged: updated_state_sum_sq = NaN at rl step 1/);
  });
});
