/**
 * The main job: a small transformer learns addition with a short supervised warm-start on worked solutions, then
 * RL on verifiable rewards. It prints its plan, the training reward as it goes (a 10-step mean with a bar) and the
 * held-out pass@1 (greedy) after the warm-start, during RL and after it, and writes metrics.jsonl, curves.svg
 * (training reward and held-out pass@1) and summary.json into its output directory. Its settings are the library's
 * defaults (TRAIN_DEFAULTS, which `rlvr train` with no flags also runs), chosen by the search in
 * docs/results/addition-regime/ (its README.md says why these).
 *
 *   npm run example:addition [-- --seed 0 --steps 250 --objective grpo --backend cpu|webgpu --threads N
 *                               --warm-start-steps 400 --eval-prompts 200 --output runs/addition-s0
 *                               --lora-r 1 --lora-alpha 32 --learning-rate X]
 *
 * With `--lora-r R` the same job trains LoRA adapters of rank R on every linear layer in RL, on the base its
 * warm-start made (every weight), at LoRA's default learning rate unless `--learning-rate` is given.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import {
  describeTraining,
  heldOutLine,
  openBackend,
  rlLabel,
  parseTrainConfig,
  train,
  type MetricRecord,
  type TrainConfig,
} from '../src/index.js';
// curves.svg and summary.json, as `rlvr train --output` writes them.
import { writeRunReport } from '../src/cli/run-report.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string', default: '0' },
    steps: { type: 'string' },
    'warm-start-steps': { type: 'string' },
    'eval-prompts': { type: 'string' },
    objective: { type: 'string' },
    output: { type: 'string' },
    backend: { type: 'string', default: 'cpu' },
    threads: { type: 'string' },
    'lora-r': { type: 'string' },
    'lora-alpha': { type: 'string' },
    'learning-rate': { type: 'string' },
  },
});
const seed = Number(values.seed);
const output = values.output ?? join('runs', `addition-s${seed}`);
const cfg = parseTrainConfig({
  seed,
  backend: values.backend as 'cpu',
  outputDir: output,
  overwrite: true,
  ...(values.objective ? { objective: values.objective as 'grpo' } : {}),
  ...(values.steps ? { steps: Number(values.steps) } : {}),
  ...(values['warm-start-steps'] ? { warmStartSteps: Number(values['warm-start-steps']) } : {}),
  ...(values['eval-prompts'] ? { evalPrompts: Number(values['eval-prompts']) } : {}),
  ...(values.threads ? { threads: Number(values.threads) } : {}),
  ...(values['learning-rate'] ? { learningRate: Number(values['learning-rate']) } : {}),
  ...(values['lora-r'] || values['lora-alpha']
    ? {
        lora: {
          ...(values['lora-r'] ? { r: Number(values['lora-r']) } : {}),
          ...(values['lora-alpha'] ? { alpha: Number(values['lora-alpha']) } : {}),
        } as TrainConfig['lora'],
      }
    : {}),
});
if (E.isLeft(cfg)) {
  console.error(cfg.left.message);
  process.exit(2);
}
const c = cfg.right;

// What the run will do, at once: the warm-start alone takes most of a minute on 2 cores.
console.log(
  `warm-start: at most ${c.warmStartSteps} steps of ${c.warmStartBatchSize} worked solutions` +
    `${c.warmStartUntil === null ? '' : ` (until greedy pass@1 on training problems reaches ${c.warmStartUntil})`}, ` +
    `then ${c.steps} RL step${c.steps === 1 ? '' : 's'} of ${c.objective} (${c.promptsPerStep} prompts x ` +
    `${c.numGenerations} completions, temperature ${c.temperature}) on ${c.backend}; held-out pass@1 on ` +
    `${c.evalPrompts} prompts after the warm-start and every ${c.evalEvery} RL steps`,
);
const training = describeTraining(c, values['learning-rate'] !== undefined);
if (training) console.log(training);

const rewards: number[] = [];
const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;
const bar = (x: number): string => '#'.repeat(Math.round(40 * Math.max(0, Math.min(1, x))));
// Step 1 and every 10th (and the last) of each phase: the run speaks from its first step.
const shown = (step: number, total: number): boolean => step === 1 || step % 10 === 0 || step === total;
const show = (r: MetricRecord): void => {
  if (r.phase === 'warmstart') {
    if (shown(r.step, c.warmStartSteps))
      console.log(`warm-start ${r.step}/${c.warmStartSteps}: loss ${Number(r.loss).toFixed(4)}`);
  }
  if (r.phase === 'rl') {
    rewards.push(Number(r.reward));
    if (shown(r.step, c.steps)) {
      const last = mean(rewards.slice(-10));
      console.log(`rl ${r.step}/${c.steps}: reward (mean of last 10 steps) ${last.toFixed(3)} ${bar(last)}`);
    }
  }
  if (r.phase === 'eval' && r.label === 'warmstart-validation') {
    // Checked every 2 steps; shown every 10th and when it reaches the target.
    if (r.step % 10 === 0 || Number(r.pass_at_1) >= (c.warmStartUntil ?? 1))
      console.log(`warm-start ${r.step}: greedy pass@1 on training problems ${Number(r.pass_at_1).toFixed(3)}`);
    return;
  }
  if (r.phase === 'eval') {
    console.log(`eval ${r.label}: held-out pass@1 ${Number(r.pass_at_1).toFixed(3)}`);
  }
};

const t0 = performance.now();
const cpu0 = process.cpuUsage();
const backend = await openBackend(c.backend, c.threads === null ? {} : { threads: c.threads });
const result = await train(c, { onRecord: show, backend });
const described = backend.describe();
backend.dispose();
const seconds = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);

await writeRunReport(
  output,
  c,
  { warmStart: result.warmStart?.passAt1 ?? null, final: result.final.passAt1 },
  { backend: described, wallSeconds: seconds, cpuSeconds: (cpu.user + cpu.system) / 1e6 },
);
console.log(`\nmetrics.jsonl, curves.svg and summary.json are in ${output}`);
console.log(
  `${heldOutLine(result.final.prompts, result.warmStart?.passAt1 ?? null, result.final.passAt1, rlLabel(c))}, ` +
    `in ${seconds.toFixed(0)} s of wall time`,
);
