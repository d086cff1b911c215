/**
 * What a finished run shows beside its metrics: `curves.svg` (the training reward as a 10-step trailing mean and
 * held-out pass@1, by RL step) and `summary.json` (its regime, the pass@1 it started from and ended at, every
 * evaluation and reward, its time and host). `rlvr train --output DIR` and the main job
 * (examples/train-addition.ts) write them from DIR/metrics.jsonl, the whole record of the run (a resumed run's
 * earlier steps included).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { cpus, loadavg } from 'node:os';
import { basename, join } from 'node:path';
import { FileSystemError } from '../platform/errors.js';
import type { TrainConfig } from '../training/config.js';
import type { MetricRecord } from '../training/metrics.js';
import { METRICS_FILE } from '../training/output-dir.js';
import { lineChartSvg } from './line-chart.js';

/** The settings that make a run's regime, as summary.json records them. */
export const REGIME_KEYS = [
  'task',
  'digits',
  'dataset',
  'modelDir',
  'warmStartSteps',
  'warmStartUntil',
  'objective',
  'objectiveOptions',
  'steps',
  'learningRate',
  'warmupSteps',
  'temperature',
  'promptsPerStep',
  'numGenerations',
  'evalEvery',
  'evalPrompts',
  'evalK',
  'lora',
] as const satisfies readonly (keyof TrainConfig)[];

export const CURVES_FILE = 'curves.svg';
export const SUMMARY_FILE = 'summary.json';
/** The reward curve's trailing window: one step's rewards are noisy. */
const REWARD_WINDOW = 10;

export interface Point {
  readonly x: number;
  readonly y: number;
}

/** A run's curves, from its metric records. */
export interface RunCurves {
  /** The mean training reward of each RL step. */
  readonly rewards: readonly Point[];
  /** Held-out pass@1 by RL step (the evaluation after the warm-start at 0). */
  readonly evaluations: readonly Point[];
  /** The warm-start's checks of greedy pass@1 on training problems (`warmStartUntil`). */
  readonly warmStartValidation: readonly { readonly step: number; readonly pass_at_1: number }[];
  /** Warm-start steps taken. */
  readonly warmStartSteps: number;
}

const value = (r: MetricRecord, key: string): number => (typeof r[key] === 'number' ? (r[key] as number) : Number.NaN);

export function runCurves(records: Iterable<MetricRecord>): RunCurves {
  const rewards: Point[] = [];
  const evaluations: Point[] = [];
  const warmStartValidation: { step: number; pass_at_1: number }[] = [];
  let warmStartSteps = 0;
  for (const r of records) {
    if (r.phase === 'warmstart') warmStartSteps = Math.max(warmStartSteps, r.step);
    else if (r.phase === 'rl') rewards.push({ x: r.step, y: value(r, 'reward') });
    else if (r.label === 'warmstart-validation')
      warmStartValidation.push({ step: r.step, pass_at_1: value(r, 'pass_at_1') });
    else evaluations.push({ x: r.at === 'warmstart' ? 0 : r.step, y: value(r, 'pass_at_1') });
  }
  return { rewards, evaluations, warmStartValidation, warmStartSteps };
}

/** A trailing mean over `window` points (fewer at the start). */
export function trailingMean(points: readonly Point[], window: number): Point[] {
  return points.map((p, i) => {
    const part = points.slice(Math.max(0, i - window + 1), i + 1);
    return { x: p.x, y: part.reduce((s, q) => s + q.y, 0) / part.length };
  });
}

/** What the run trained on, for the chart's title. */
const taskLabel = (cfg: TrainConfig): string =>
  cfg.dataset ? basename(cfg.dataset) : `${cfg.task}${cfg.digits ? ` ${JSON.stringify(cfg.digits)}` : ''}`;

export function curvesSvg(cfg: TrainConfig, curves: RunCurves): string {
  return lineChartSvg({
    title: `${cfg.objective} on ${taskLabel(cfg)}, seed ${cfg.seed}`,
    xTitle: 'RL step',
    yTitle: 'reward, pass@1',
    series: [
      { name: `training reward (${REWARD_WINDOW}-step mean)`, points: trailingMean(curves.rewards, REWARD_WINDOW) },
      { name: 'held-out pass@1 (greedy)', points: curves.evaluations, dots: true },
    ],
  });
}

/** How long the run took in this process, and on what. */
export interface RunTiming {
  readonly backend: string;
  readonly wallSeconds: number;
  readonly cpuSeconds: number;
}

const round4 = (x: number): number | null => (Number.isFinite(x) ? Math.round(x * 1e4) / 1e4 : null);

export function runSummary(
  cfg: TrainConfig,
  curves: RunCurves,
  passAt1: { readonly warmStart: number | null; readonly final: number },
  timing: RunTiming,
): Record<string, unknown> {
  return {
    seed: cfg.seed,
    config: Object.fromEntries(REGIME_KEYS.map((k) => [k, cfg[k]])),
    backend: timing.backend,
    warmStartStepsTaken: curves.warmStartSteps,
    warmStartValidation: curves.warmStartValidation,
    warmStartPassAt1: passAt1.warmStart,
    finalPassAt1: passAt1.final,
    evaluations: curves.evaluations,
    rewards: curves.rewards.map((p) => round4(p.y)),
    wallSeconds: Math.round(timing.wallSeconds),
    cpuSeconds: Math.round(timing.cpuSeconds),
    host: { cpus: cpus().length, loadavg1AtEnd: round4(loadavg()[0]!) },
  };
}

/** The records of DIR/metrics.jsonl (none if the run wrote none). */
export async function readRunRecords(dir: string): Promise<MetricRecord[]> {
  const path = join(dir, METRICS_FILE);
  const text = await readFile(path, 'utf8').catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT') return '';
    throw FileSystemError.from(path, e);
  });
  const records: MetricRecord[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    try {
      records.push(JSON.parse(line) as MetricRecord);
    } catch {
      throw new FileSystemError(path, 'EINVAL', `line ${i + 1} is not a JSON record`);
    }
  });
  return records;
}

/** Write DIR/curves.svg and DIR/summary.json from DIR/metrics.jsonl; returns the paths written. */
export async function writeRunReport(
  dir: string,
  cfg: TrainConfig,
  passAt1: { readonly warmStart: number | null; readonly final: number },
  timing: RunTiming,
): Promise<string[]> {
  const curves = runCurves(await readRunRecords(dir));
  const files: [string, string][] = [
    [join(dir, CURVES_FILE), curvesSvg(cfg, curves)],
    [join(dir, SUMMARY_FILE), `${JSON.stringify(runSummary(cfg, curves, passAt1, timing), null, 2)}\n`],
  ];
  for (const [path, text] of files)
    await writeFile(path, text).catch((e: unknown) => {
      throw FileSystemError.from(path, e);
    });
  return files.map(([path]) => path);
}
