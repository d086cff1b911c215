/**
 * The compact per-run results that docs/RESULTS.md is built from, committed under `docs/results/<scale>/` so the
 * report can be rebuilt from the repository alone: `runs/<job id>.json` is each job's result file (one line) plus
 * the means over RL steps of the metrics the report reads from its run's metrics.jsonl, and `timing.jsonl` is the
 * runner's log of its invocations. Checkpoints and full metric logs stay under the ignored `runs/`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Result } from './jobs.js';

/** The metrics.jsonl keys the report's diagnostics table reads (means over RL steps). */
export const DIAGNOSTIC_METRICS = [
  'grad_norm',
  'ratio/mean',
  'clip_ratio/region_mean',
  'contrastive/pos_prob_mean',
  'score/pos_mean',
  'score/neg_mean',
  // Under BICC: the per-token log pi_old(o|q) - log pi_old(o|c, q) on conditioned positive and negative rows.
  'bicc_log_ratio_pos',
  'bicc_log_ratio_neg',
] as const;

export type CompactResult = Result & { readonly rlMetricMeans?: Readonly<Record<string, number>> };

export interface TimingRecord {
  readonly at: string;
  readonly grids: readonly string[];
  readonly jobs: number;
  readonly jobsAtOnce: number;
  readonly wallSeconds: number;
  readonly cpus: number;
  readonly cpuModel: string;
  readonly loadAverage: readonly number[];
  /** Set on records rebuilt from an older report rather than written by the runner. */
  readonly note?: string;
}

/** All JSON files under a directory, in sorted path order. */
export function loadJsonTree<T>(dir: string): T[] {
  if (!existsSync(dir)) return [];
  const out: T[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (name.endsWith('.json')) out.push(JSON.parse(readFileSync(p, 'utf8')) as T);
    }
  };
  walk(dir);
  return out;
}

/** The mean over RL steps of one metric in a run's metrics.jsonl (null when the run or the metric is absent). */
function metricMean(output: string, id: string, key: string): number | null {
  const p = join(output, id, 'metrics.jsonl');
  if (!existsSync(p)) return null;
  const xs = readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((r) => r.phase === 'rl' && typeof r[key] === 'number')
    .map((r) => r[key] as number);
  return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : null;
}

/**
 * Write the compact results of every job under `<output>/results` (and the runner's timing log, after `previous`
 * records kept from before) into `dir`. Returns how many results were written.
 */
export function exportCompact(output: string, dir: string, previous: readonly TimingRecord[] = []): number {
  const results = loadJsonTree<Result>(join(output, 'results'));
  for (const r of results) {
    const means: Record<string, number> = {};
    if (r.kind === 'rl') {
      for (const key of DIAGNOSTIC_METRICS) {
        const m = metricMean(output, r.id, key);
        if (m !== null) means[key] = m;
      }
    }
    const compact: CompactResult = r.kind === 'rl' ? { ...r, rlMetricMeans: means } : r;
    const path = join(dir, 'runs', `${r.id}.json`);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, `${JSON.stringify(compact)}\n`);
  }
  const timing = [...previous, ...readTiming(output)];
  const lines = timing.map((t) => `${JSON.stringify(t)}\n`).join('');
  if (timing.length > 0) writeFileSync(join(dir, 'timing.jsonl'), lines);
  return results.length;
}

export const loadCompact = (dir: string): CompactResult[] => loadJsonTree<CompactResult>(join(dir, 'runs'));

export function readTiming(dir: string): TimingRecord[] {
  const p = join(dir, 'timing.jsonl');
  if (!existsSync(p)) return [];
  return readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as TimingRecord);
}
