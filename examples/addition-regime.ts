/**
 * The search behind the main job's settings (issue 21): one training run per call, from a JSON config (the
 * fields of `TrainConfig`), written as one small result file: the config, the held-out evaluations (after the
 * warm-start, every `evalEvery` RL steps, after RL), the training reward of every RL step, and the wall time
 * of each phase. `docs/results/addition-regime/` holds the files of the search and `README.md` there reads them.
 *
 *   node esbuild.config.mjs && node dist/examples/addition-regime.js --name w200-lr1e-3-s0 \
 *     --config '{"warmStartSteps":200,"objective":"grpo","learningRate":1e-3,"steps":150,"seed":0}' \
 *     [--out docs/results/addition-regime]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import { parseTrainConfig, train, type MetricRecord, type TrainConfig } from '../src/index.js';

const { values } = parseArgs({
  options: {
    name: { type: 'string' },
    config: { type: 'string', default: '{}' },
    out: { type: 'string', default: 'docs/results/addition-regime' },
  },
});
if (!values.name) {
  console.error('usage: addition-regime --name NAME --config JSON [--out DIR]');
  process.exit(2);
}
const given = JSON.parse(values.config) as Partial<TrainConfig>;
const cfg = parseTrainConfig(given);
if (E.isLeft(cfg)) {
  console.error(cfg.left.message);
  process.exit(2);
}

const t0 = performance.now();
let warmStartSeconds = 0;
const rewards: number[] = [];
const evals: { step: number; at: string; pass_at_1: number; avg_at_k: number; pass_at_k: number }[] = [];
const validation: { step: number; pass_at_1: number }[] = [];
let warmStartTaken = 0;
const onRecord = (r: MetricRecord): void => {
  if (r.phase === 'warmstart') warmStartTaken = r.step;
  if (r.phase === 'rl') {
    rewards.push(Number(r.reward));
    if (r.step % 10 === 0) console.log(`${values.name} rl ${r.step}: reward ${Number(r.reward).toFixed(3)}`);
  }
  if (r.phase === 'eval' && r.label === 'warmstart-validation') {
    validation.push({ step: r.step, pass_at_1: Number(r.pass_at_1) });
    return;
  }
  if (r.phase === 'eval') {
    if (r.label === 'after-warmstart') warmStartSeconds = (performance.now() - t0) / 1000;
    const k = cfg.right.evalK;
    evals.push({
      step: r.step,
      at: String(r.at),
      pass_at_1: Number(r.pass_at_1),
      avg_at_k: Number(r[`avg_at_${k}`]),
      pass_at_k: Number(r[`pass_at_${k}`]),
    });
    console.log(`${values.name} eval ${r.label} (rl step ${r.at === 'rl' ? r.step : 0}): pass@1 ${r.pass_at_1}`);
  }
};
const result = await train(cfg.right, { onRecord });
const seconds = (performance.now() - t0) / 1000;
const round = (x: number): number => Math.round(x * 1e4) / 1e4;
const record = {
  name: values.name,
  config: given,
  backend: cfg.right.backend,
  host: { cpus: cpus().length, loadavg1AtEnd: round(loadavg()[0]!) },
  seconds: round(seconds),
  warmStartSeconds: round(warmStartSeconds),
  warmStartStepsTaken: warmStartTaken,
  warmStartValidation: validation,
  warmStartPassAt1: result.warmStart?.passAt1 ?? null,
  finalPassAt1: result.final.passAt1,
  evals,
  rewards: rewards.map(round),
};
mkdirSync(values.out!, { recursive: true });
writeFileSync(join(values.out!, `${values.name}.json`), `${JSON.stringify(record)}\n`);
console.log(
  `${values.name}: pass@1 ${record.warmStartPassAt1} -> ${record.finalPassAt1} in ${seconds.toFixed(0)} s (warm-start ${warmStartSeconds.toFixed(0)} s)`,
);
