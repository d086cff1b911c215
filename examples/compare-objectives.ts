/**
 * GRPO vs ConSPO on the same seeds: one shared warm-start per seed (so both start from the same policy), then RL
 * with each objective. Writes every metric as JSON lines, a reward-curve plot as SVG (vega-lite) and a summary;
 * prints each run's progress as `rlvr train` does, and ends with a table of the runs.
 *
 *   npm run example:compare [-- --seeds 0,1 --steps 120 --output runs/compare]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import { parseTrainConfig, train, type MetricRecord, type objectives as obj } from '../src/index.js';

import { createProgress, markdownTable } from '../src/cli/progress.js';
import { lineChartSvg, smooth } from './plot.js';

type ObjectiveName = obj.ObjectiveName;

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '0' },
    steps: { type: 'string', default: '120' },
    objectives: { type: 'string', default: 'grpo,conspo' },
    output: { type: 'string', default: 'runs/compare' },
  },
});
const seeds = values.seeds.split(',').map(Number);
const objectives = values.objectives.split(',') as ObjectiveName[];
mkdirSync(values.output, { recursive: true });

/** A run's progress, as `rlvr train` prints it. */
function shown(warmStartUntil: number | null) {
  const progress = createProgress({ warmStartUntil });
  return {
    onProgress: (p: Parameters<typeof progress.step>[0]) => progress.step(p),
    onRecord: (r: MetricRecord) => {
      if (r.phase === 'eval') progress.eval(r);
    },
    stop: () => progress.stop(),
  };
}

interface RunSummary {
  objective: string;
  seed: number;
  warmStartPassAt1: number;
  finalPassAt1: number;
  finalAvgAtK: number;
  rewards: { x: number; y: number }[];
}
const summaries: RunSummary[] = [];
for (const seed of seeds) {
  // The warm-start is shared: train it once, save it, and start every objective's RL from that checkpoint.
  const wsDir = join(values.output, `warmstart-seed${seed}`);
  const ws = parseTrainConfig({ seed, steps: 0, outputDir: wsDir });
  if (E.isLeft(ws)) throw ws.left;
  console.log(`seed ${seed}: the shared warm-start`);
  const wsProgress = shown(ws.right.warmStartUntil);
  await train(ws.right, { onProgress: wsProgress.onProgress, onRecord: wsProgress.onRecord });
  wsProgress.stop();
  for (const objective of objectives) {
    const cfg = parseTrainConfig({
      seed,
      objective,
      steps: Number(values.steps),
      resume: join(wsDir, 'checkpoint'),
      outputDir: join(values.output, `${objective}-seed${seed}`),
    });
    if (E.isLeft(cfg)) throw cfg.left;
    const records: MetricRecord[] = [];
    console.log(`seed ${seed}: ${objective}`);
    const progress = shown(null);
    const result = await train(cfg.right, {
      onProgress: progress.onProgress,
      onRecord: (r) => {
        records.push(r);
        progress.onRecord(r);
      },
    });
    progress.stop();
    const rewards = records.filter((r) => r.phase === 'rl').map((r) => ({ x: r.step, y: Number(r.reward) }));
    summaries.push({
      objective,
      seed,
      warmStartPassAt1: result.warmStart?.passAt1 ?? NaN,
      finalPassAt1: result.final.passAt1,
      finalAvgAtK: result.final.avgAtK,
      rewards,
    });
    console.log(
      `${objective} seed ${seed}: pass@1 ${result.warmStart?.passAt1.toFixed(3)} -> ${result.final.passAt1.toFixed(3)}, avg@k ${result.final.avgAtK.toFixed(3)}`,
    );
  }
}

const series = objectives.map((objective) => {
  const runs = summaries.filter((s) => s.objective === objective);
  const steps = runs[0]!.rewards.map((p) => p.x);
  const mean = steps.map((x, i) => ({ x, y: runs.reduce((s, r) => s + r.rewards[i]!.y, 0) / runs.length }));
  return { name: objective, points: smooth(mean, 5) };
});
writeFileSync(
  join(values.output, 'reward-curves.svg'),
  await lineChartSvg(
    `Training reward (mean over seeds ${seeds.join(', ')}, 5-step moving average)`,
    'RL step',
    'reward',
    series,
  ),
);
writeFileSync(
  join(values.output, 'summary.json'),
  JSON.stringify(
    summaries.map(({ rewards, ...s }) => s),
    null,
    2,
  ),
);
console.log(`\nwrote ${join(values.output, 'reward-curves.svg')} and summary.json\n`);
console.log(
  markdownTable(
    ['objective', 'seed', 'held-out pass@1 after warm-start', 'after RL', 'avg@k after RL'],
    summaries.map((s) => [
      s.objective,
      String(s.seed),
      ...[s.warmStartPassAt1, s.finalPassAt1, s.finalAvgAtK].map((x) => x.toFixed(3)),
    ]),
  ),
);
