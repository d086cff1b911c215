import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { dispose } from '../../src/core/scope.js';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { tensor } from '../../src/ops/creation.js';
import type { TrainWarning } from '../../src/training/run.js';
import { train } from '../../src/training/trainer.js';
import { TINY_HUB_CONFIG, tinyHubDir } from '../hf/tiny-hub.js';
import { rlvrSync } from './helpers/cli.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * `--save-dtype bf16` and a finite weight past bf16's range (|w| >= 3.3961e38, which rounds to infinity): the run
 * wrote an infinity, exited 0, and the project then refused its own OUTPUT/model (exit 3). Such a weight is now
 * written as bf16's largest finite value, 3.3895e38 with its sign (within one bf16 step of what was trained), and
 * the run warns naming the tensor; NaN and the infinities stay what they are. README, "--save-dtype".
 */
const bundle = useCliBundle('bf16-range');
const cpu = new CpuBackend({ threads: 1 });
/** bf16's largest finite value, written out (0x7f7f): what the saturated weights must read back as. */
const LARGEST_BF16 = 3.3895313892515355e38;
const RUN = ['--task', 'addition', '--max-completion-length', '8', '--prompts-per-step', '2', '--num-generations', '2'];
/** The f32 with these bits. */
const f32 = (bits: number): number => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
const EVAL = ['--eval-prompts', '4', '--eval-k', '1', '--seed', '1', '--steps', '0'];

async function finalNormOf(dir: string, allowNonFinite = false): Promise<number[]> {
  const m = await loadHfCheckpoint(dir, cpu, { allowNonFinite })();
  if (E.isLeft(m)) throw m.left;
  const values = Array.from(m.right.params.finalNorm.dataSync());
  dispose(m.right.params);
  return values;
}

describe('a bf16 Hub save: finite weights past its range saturate, the rest rounds as before', () => {
  it('saveHfCheckpoint: from the tie above bf16 max to f32 max, +-3.3895e38, named; below, NaN, infinities as ever', async () => {
    const dir = await tinyHubDir();
    const m = await loadHfCheckpoint(dir, cpu)();
    if (E.isLeft(m)) throw m.left;
    const norm = m.right.params.finalNorm.dataSync().slice();
    const tie = f32(0x7f7f8000); // 3.3961e38, half a bf16 step above its largest: the tie rounds to infinity
    const belowTie = f32(0x7f7f7fff); // rounds down to bf16's largest, as rounding always did
    const exact = f32(0x7f7e0000); // a bf16 value, kept as it is
    norm.set([3.4e38, -3.4e38, tie, -belowTie, exact, Number.NaN, Number.NEGATIVE_INFINITY, 1.5]);
    const params = { ...m.right.params, finalNorm: tensor(norm, m.right.params.finalNorm.shape, { backend: cpu }) };
    const out = mkdtempSync(join(tmpdir(), 'rlvr-bf16-range-'));
    const saved = await saveHfCheckpoint(out, params, TINY_HUB_CONFIG, { dtype: 'bf16' })();
    if (E.isLeft(saved)) throw saved.left;
    expect(saved.right.saturated).toEqual([{ name: 'model.norm.weight', count: 3 }]);
    const back = await finalNormOf(out, true);
    expect(back.slice(0, 8)).toEqual([
      LARGEST_BF16,
      -LARGEST_BF16,
      LARGEST_BF16,
      -LARGEST_BF16,
      exact,
      Number.NaN,
      Number.NEGATIVE_INFINITY,
      1.5,
    ]);
    dispose([m.right.params, params.finalNorm]);
  });

  it('rlvr train --save-dtype bf16 on a model holding 3.4e38: one warning naming the tensor, and the output loads', async () => {
    const model = await tinyHubDir({ poison: 3.4e38 });
    const out = join(mkdtempSync(join(tmpdir(), 'rlvr-bf16-cli-')), 'run');
    const r = rlvrSync(bundle.path, [
      'train',
      '--model',
      model,
      ...RUN,
      ...EVAL,
      '--save-dtype',
      'bf16',
      '--output',
      out,
    ]);
    expect(r.status).toBe(0);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^warning: .*model holds bf16's largest value.*: model\.norm\.weight \(1\)$/),
    ]);
    expect((await finalNormOf(join(out, 'model')))[0]).toBe(LARGEST_BF16);
    // The project reads its own output back without --allow-non-finite-weights (it exited 3 here).
    const again = rlvrSync(bundle.path, ['train', '--model', join(out, 'model'), ...RUN, ...EVAL]);
    expect([again.status, again.stderr]).toEqual([0, '']);
  });

  it('a LoRA merge saved in bf16 saturates the same way and says so', async () => {
    const model = await tinyHubDir({ poison: -3.4e38 });
    const out = join(mkdtempSync(join(tmpdir(), 'rlvr-bf16-merge-')), 'run');
    const argv = [...RUN, ...EVAL, '--lora-r', '2', '--merge-lora', '--save-dtype', 'bf16', '--output', out];
    const cfg = parseTrainArgs(['--model', model, ...argv]);
    if (E.isLeft(cfg)) throw cfg.left;
    const warnings: TrainWarning[] = [];
    const result = await train(cfg.right, { backend: cpu, onWarning: (w) => warnings.push(w) });
    dispose(result.params);
    expect(warnings.map((w) => [w.kind, w.tensors])).toEqual([['saturated-bf16', ['model.norm.weight']]]);
    expect((await finalNormOf(join(out, 'model')))[0]).toBe(-LARGEST_BF16);
  });
});
