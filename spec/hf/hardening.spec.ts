import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { describeFailure, EXIT } from '../../src/cli/exit-codes.js';
import { dispose } from '../../src/core/scope.js';
import { loadHfCheckpoint } from '../../src/nn/hf-checkpoint.js';
import type { MetricRecord } from '../../src/training/metrics.js';
import { train } from '../../src/training/trainer.js';
import { tinyHubDir } from './tiny-hub.js';

/**
 * Issue 19, Hub directories as an attacker or a careless user hands them over: every refusal is a typed error
 * naming the file (and field or tensor) with exit 3, before anything trains.
 */
const cpu = new CpuBackend();
const RUN = ['--steps', '1', '--prompts-per-step', '2', '--num-generations', '2', '--max-completion-length', '4'];
const EVAL = ['--eval-prompts', '2', '--eval-k', '1'];

/** `rlvr train --model dir ...` through the library: the error it ends with, and no record written. */
async function trainError(dir: string, extra: readonly string[] = []): Promise<unknown> {
  const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, ...extra]);
  if (E.isLeft(cfg)) throw cfg.left;
  const records: MetricRecord[] = [];
  const e = await train(cfg.right, { backend: cpu, onRecord: (r) => records.push(r) }).then(
    (r) => {
      dispose(r.params);
      return null;
    },
    (err: unknown) => err,
  );
  expect(records).toEqual([]);
  return e;
}

describe('issue 19 item 8: NaN/Inf weights are refused at load', () => {
  for (const value of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
    it(`a weight of ${value} is refused naming the tensor (the run exited 4 later, blaming training)`, async () => {
      const dir = await tinyHubDir({ poison: value });
      const r = await loadHfCheckpoint(dir, cpu)();
      expect(E.isLeft(r) && r.left).toMatchObject({
        kind: 'non-finite',
        field: 'model.norm.weight',
        file: 'model.safetensors',
      });
      const e = await trainError(dir);
      expect(e).toMatchObject({ kind: 'non-finite', field: 'model.norm.weight' });
      expect(describeFailure(e).code).toBe(EXIT.io);
      expect(describeFailure(e).line).toMatch(/model\.safetensors.*model\.norm\.weight.*--allow-non-finite-weights/);
    });
  }

  it('allowed when asked: loadHfCheckpoint(..., { allowNonFinite }) and --allow-non-finite-weights', async () => {
    const dir = await tinyHubDir({ poison: Number.NaN });
    const r = await loadHfCheckpoint(dir, cpu, { allowNonFinite: true })();
    if (E.isLeft(r)) throw r.left;
    expect(Number.isNaN(r.right.params.finalNorm.dataSync()[0])).toBe(true);
    dispose(r.right.params);
    const cfg = parseTrainArgs(['--model', dir, ...RUN, ...EVAL, '--allow-non-finite-weights']);
    if (E.isLeft(cfg)) throw cfg.left;
    expect(cfg.right.allowNonFiniteWeights).toBe(true);
  });
});

void mkdirSync;
void mkdtempSync;
void rmSync;
void writeFileSync;
void tmpdir;
void join;
