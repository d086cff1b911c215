/**
 * docs/RESULTS.md and its plots, built only from the compact per-run results committed under
 * `docs/results/<scale>/` (`compact.ts`: the result files, their metric means and the runner's timing log), so a
 * fresh clone rebuilds the same report: nothing here trains or samples. Tables follow the papers' layout (methods
 * as rows), every number
 * is a mean ± sample std over seeds, and every claim gets the verdict of the rule in `stats.ts`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import {
  heldOutProblems,
  parseTrainConfig,
  taskFor,
  WARM_START_CHECK_EVERY,
  WARM_START_VALIDATION,
} from '../../src/index.js';
import { intervalChartSvg, type IntervalPoint } from '../plot.js';
import {
  ABLATION_METHODS,
  CONSPO_PAPER,
  OBJECTIVE_METHODS,
  groupSizeMethods,
  promptsFor,
  sweepMethod,
  warmStartConfig,
  type Method,
  type ScaleSettings,
  type SweepParam,
  type TaskSpec,
} from './grid.js';
import type { Result, RlResult, VarianceResult, WarmStartResult } from './jobs.js';
import { loadCompact, readTiming, type CompactResult } from './compact.js';
import {
  binomialSe,
  markdownTable,
  mean,
  paired,
  pct,
  signedPts,
  std,
  seedsForPower,
  tCritical,
  tCritical95,
  verdict,
  type PairedComparison,
  type Verdict,
} from './stats.js';

export interface ReportOptions {
  /** The compact results: `runs/` and `timing.jsonl` (`docs/results/<scale>` in the repository). */
  readonly results: string;
  readonly docs: string;
  readonly settings: ScaleSettings;
  readonly seeds: readonly number[];
}

type Metric = 'passAt1' | 'avgAtK';

class Index {
  constructor(
    readonly results: readonly Result[],
    readonly seeds: readonly number[],
  ) {}
  warm(task: string): WarmStartResult[] {
    return this.results
      .filter((r): r is WarmStartResult => r.kind === 'warmstart' && r.task === task && this.seeds.includes(r.seed))
      .sort((a, b) => a.seed - b.seed);
  }
  rl(task: string, method: string): RlResult[] {
    return this.results
      .filter(
        (r): r is RlResult =>
          r.kind === 'rl' && r.task === task && r.method.id === method && this.seeds.includes(r.seed),
      )
      .sort((a, b) => a.seed - b.seed);
  }
  variance(task: string, point: number): VarianceResult[] {
    return this.results
      .filter(
        (r): r is VarianceResult =>
          r.kind === 'variance' && r.task === task && r.point === point && this.seeds.includes(r.seed),
      )
      .sort((a, b) => a.seed - b.seed);
  }
  values(task: string, method: string, metric: Metric): number[] {
    return this.rl(task, method).map((r) => r.final[metric]);
  }
  /** Paired by seed: only the seeds both have. */
  compare(task: string, a: string, b: string, f: (r: RlResult) => number): PairedComparison | null {
    const ra = this.rl(task, a);
    const rb = this.rl(task, b);
    const common = ra.map((r) => r.seed).filter((s) => rb.some((x) => x.seed === s));
    if (common.length < 1) return null;
    return paired(
      common.map((s) => f(ra.find((r) => r.seed === s)!)),
      common.map((s) => f(rb.find((r) => r.seed === s)!)),
    );
  }
}

const final = (metric: Metric) => (r: RlResult) => r.final[metric];
/** Mean training reward over the second half of the RL steps (Figure 1 right compares the curves). */
const lateReward = (r: RlResult): number => mean(r.curve.slice(Math.floor(r.curve.length / 2)).map((p) => p.reward));
const allReward = (r: RlResult): number => mean(r.curve.map((p) => p.reward));

const fmtT = (t: number): string => (Number.isFinite(t) ? t.toFixed(2) : t > 0 ? '+inf' : '-inf');
const VERDICT_TEXT: Record<Verdict, string> = {
  holds: '**holds**',
  contradicted: '**contradicted**',
  inconclusive: 'inconclusive',
};

function describe(c: PairedComparison | null): string {
  if (!c) return 'no runs';
  return `${signedPts(c.meanDiff)} pts (std ${(100 * c.stdDiff).toFixed(1)}, t = ${fmtT(c.t)}, ${c.wins}/${c.diffs.length} seeds better)`;
}

/** Minimum effect: the binomial standard error of one evaluation at the baseline's mean rate. */
const noise = (ix: Index, task: string, baseline: string, metric: Metric, prompts: number): number => {
  const v = ix.values(task, baseline, metric);
  return v.length ? binomialSe(mean(v), prompts) : 0;
};

interface Claim {
  readonly claim: string;
  readonly paper: string;
  readonly here: string;
  readonly verdict: Verdict | 'n/a';
}

/** `buildReport` found no results to build from. */
export class NoResultsError extends Error {}

export async function buildReport(o: ReportOptions): Promise<string[]> {
  const s = o.settings;
  const results = loadCompact(o.results);
  // An empty table is not a report: refuse rather than overwrite the committed one.
  if (results.length === 0) {
    throw new NoResultsError(`no results under ${join(o.results, 'runs')}: nothing to build the report from`);
  }
  const ix = new Index(results, o.seeds);
  const suffix = s.scale === 'small' ? '' : `-${s.scale}`;
  const mdPath = join(o.docs, `RESULTS${suffix}.md`);
  const figDir = join(o.docs, 'results', s.scale);
  mkdirSync(figDir, { recursive: true });
  const fig = (name: string): string => relative(o.docs, join(figDir, name));
  const written: string[] = [];
  const writeFig = (name: string, svg: string): void => {
    writeFileSync(join(figDir, name), svg);
    written.push(join(figDir, name));
  };
  const n = s.evalPrompts;
  const k = s.evalK;
  const study = s.tasks.find((t) => t.id === s.studyTask)!;
  const evalSet = new Map(
    [...s.tasks, ...(s.contextTask ? [s.contextTask] : [])].map((t) => [t.id, heldOutCounts(s, t, n)]),
  );
  /** n_eff of an evaluation on these tasks (of their average, for several: T² / Σ 1/n_eff). */
  const evalN = (tasks: readonly string[]): number =>
    tasks.length ** 2 / tasks.reduce((acc, id) => acc + 1 / evalSet.get(id)!.effective, 0);
  const md: string[] = [];
  const claims: Claim[] = [];
  const timing = readTiming(o.results);
  const cpuModel = timing.at(-1)?.cpuModel ?? 'unknown';
  const cpuCount = timing.at(-1)?.cpus ?? NaN;

  md.push(`# Results: the papers' claims on this project's tasks (${s.scale} scale)`);
  md.push('');
  md.push(
    `Generated by \`examples/experiments/report.ts\` from the result files of \`examples/experiments/run.ts\`; do not edit by hand ` +
      `(the hand-written reading is \`docs/results/reading${suffix}.md\`, included below). Seeds: ${o.seeds.join(', ')} ` +
      `(${o.seeds.length} of the ${s.plannedSeeds} the power analysis asks for). ` +
      `Every cell is the mean ± sample standard deviation over seeds; "pts" are percentage points.`,
  );
  md.push('');
  md.push(
    `**Hardware.** The last grid ran on a ${cpuCount}-core CPU (${cpuModel}); every run used the ` +
      `${[...new Set(results.map((r) => ('config' in r ? r.config.backend : 'cpu')))].join(', ')} backend ` +
      '(as its result file records; the experiment runner trains on the CPU backend, one single-threaded process per job). ' +
      `This file covers the ${s.scale} scale only.`,
  );
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Regenerate');
  md.push('');
  md.push('From a fresh clone (Node 22+):');
  md.push('');
  md.push('```sh');
  md.push('.ci/setup');
  md.push(
    `npm run experiments -- --scale ${s.scale} --seeds ${o.seeds.join(',')} --jobs 2${s.scale === 'small' ? '' : ` --output runs/experiments-${s.scale}`}   # every run, then this file and its plots`,
  );
  md.push(
    `npm run experiments -- --scale ${s.scale} --seeds ${o.seeds.join(',')} --report-only                # rebuild this file from ` +
      `${'`'}docs/results/${s.scale}/runs${'`'} alone`,
  );
  md.push('```');
  md.push('');
  md.push(
    'One grid at a time: `--grid objectives`, `ablations`, `sweep`, `groups` (BICC group sizes) or `variance` (comma-separated), ' +
      '`--resume-grid` skips jobs whose result file exists. Runs are deterministic (seeded; the CPU backend computes the same ' +
      'floats on every machine), so rerunning the grid with the code that produced these results reproduces the tables exactly; ' +
      'only the wall and CPU times differ (the reading says where the code has changed since). ' +
      `Per-run summaries: [\`results/${s.scale}/summary.json\`](${fig('summary.json')}); the compact per-run results this file is built ` +
      `from: \`results/${s.scale}/runs/\` (a grid run writes them; \`--report-only\` refuses to run without them).`,
  );
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Protocol');
  md.push('');
  md.push(
    `- **Policy**: the project's Llama-layout transformer (d_model ${s.model.dModel}, ${s.model.nLayers} layers, ${s.model.nHeads} heads, ` +
      `${s.model.nKvHeads} KV heads, d_ff ${s.model.dFf}), character tokenizer, trained from scratch.`,
  );
  md.push(
    `- **Warm-start** (one per task and seed, shared by every method of that task and seed): supervised steps on worked solutions, ` +
      `batch ${s.warmStartBatchSize}, peak lr ${s.warmStartLearningRate}, cosine decay (${s.tasks.map(warmStartPlan).join(', ')}). ` +
      'Every method resumes from that checkpoint, including its training RNG state, so comparisons are **paired by seed**.',
  );
  md.push(
    `- **RL** (identical rollout budget for every configuration): ${s.steps} steps × ${s.promptsPerStep} prompts × G = ${s.numGenerations} ` +
      `(${s.steps * s.promptsPerStep * s.numGenerations} rollouts), sampling temperature ${s.temperature}, up to ${s.maxCompletionLength} new tokens, ` +
      `AdamW lr ${s.learningRate} (warmup ${s.warmupSteps} updates, cosine decay), grad-norm clip 1, ${s.numIterations} epoch per batch in ` +
      `minibatches of ${s.groupsPerMinibatch} groups (${s.promptsPerStep / s.groupsPerMinibatch} updates per step: all but the first are off-policy; the diagnostics give the mean ratio and the share of clipped tokens). ` +
      'Each objective uses its paper defaults (defined beside each loss in `src/objectives/`; ConSPO τ = 10, M = 0.01, α = 0.3). RCC: δ = Σ_t (log π_old − log π_ref), the reference being the warm-started policy. ' +
      `BICC: context share 0.4 of ${s.model.maxSeqLen} tokens.`,
  );
  const distinct = s.tasks.map((t) => `${t.id}: ${evalSet.get(t.id)!.distinct} distinct`);
  md.push(
    `- **Evaluation**: ${n} held-out prompts per task (${distinct.join(', ')}: the test split, by prompt hash, is never trained on; the ${n} are drawn from it with replacement and are the same for every run): ` +
      `pass@1 with greedy decoding, avg@${k} = mean reward of ${k} samples at temperature ${s.temperature}, after the last RL step. ` +
      'Draws of the same prompt are not independent (a greedy answer is the same each time), so the standard errors here count ' +
      'the effective number of independent prompts n_eff = (Σ c)² / Σ c², c the number of draws of each distinct prompt ' +
      `(${s.tasks.map((t) => `${t.id}: ${evalSet.get(t.id)!.effective.toFixed(1)}`).join(', ')}). ` +
      `The binomial standard error of one evaluation is then at most ${s.tasks.map((t) => `${(100 * binomialSe(0.5, evalN([t.id]))).toFixed(1)} pts on ${t.id}`).join(', ')} (at 50%).`,
  );
  md.push(`- **The RL settings were not tuned per method.** ${s.tuning}`);
  md.push('');

  const units = s.tasks.length * o.seeds.length;
  const laterPoints = s.variancePoints.filter((p) => p > 0).length;
  md.push('### How claims are judged');
  md.push('');
  md.push(
    `A claim "A beats B" is judged on the per-seed paired differences d_s = A_s − B_s (same warm-start, same RL seed): it **holds** when their mean is positive, ` +
      `larger than the binomial standard error of one evaluation at B's rate (so a consistent but sub-noise difference does not count), and significant by a one-sided paired t-test at 5% ` +
      `(t > ${tCritical95(o.seeds.length - 1).toFixed(2)} with ${o.seeds.length} seeds); it is **contradicted** when the same holds in the other direction; otherwise it is **inconclusive**. ` +
      `With ${o.seeds.length} seeds the test only detects effects that are large relative to their spread (the next section says which): "inconclusive" means "not shown at this scale", not "false". ` +
      'The rule was written before the grid ran (`examples/experiments/stats.ts`) and is applied by the report generator, not by hand. Two changes were made after ' +
      'seeing the results, both making tests stricter, neither changing a verdict: the comparison with the *strongest* other objective, which is picked from these ' +
      'same results, is tested at 5% divided by the number of candidates (Bonferroni) rather than at 5%; and the variance test treats each (task, seed) pair, ' +
      `averaged over its measurement points, as one unit (${units} units instead of ${units * laterPoints} correlated values).`,
  );
  md.push('');
  const seedsWith = (has: (seed: number) => boolean): string => {
    const xs = o.seeds.filter(has);
    return xs.length === 0 ? 'none' : xs.length === 1 ? `seed ${xs[0]}` : `${xs.length} seeds (${xs.join(', ')})`;
  };
  const ran = (method: string) => (seed: number) => ix.rl(study.id, method).some((r) => r.seed === seed);
  const lastPoint = s.variancePoints.at(-1)!;
  power(
    md,
    s,
    new Index(results, s.pilotSeeds),
    evalN,
    [
      `Table 1 ${seedsWith(ran('grpo'))}`,
      `Table 6 ${seedsWith(ran(ABLATION_METHODS[0]!.id))}`,
      `Figure 2 ${seedsWith(ran(sweepMethod('tau', s.tau[0]!).id))}`,
      `group sizes ${seedsWith(ran(groupSizeMethods(s.groupSizes[0]!)[0]!.id))}`,
      `variance ${seedsWith((seed) => ix.variance(study.id, lastPoint).some((r) => r.seed === seed))}`,
    ].join('; '),
  );

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Warm-started policies');
  md.push('');
  md.push(
    markdownTable(
      ['Task', 'warm-start steps', 'pass@1', `avg@${k}`, `pass@${k}`, 'CPU s per warm-start'],
      s.tasks.map((t) => {
        const w = ix.warm(t.id);
        return [
          t.label,
          t.warmStartUntil === null ? String(t.warmStartSteps) : stepsOf(w.map((r) => r.stepsTaken ?? Number.NaN)),
          pct(w.map((r) => r.eval.passAt1)),
          pct(w.map((r) => r.eval.avgAtK)),
          pct(w.map((r) => r.eval.passAtK)),
          w.length ? mean(w.map((r) => r.cpuSeconds)).toFixed(0) : '–',
        ];
      }),
    ),
  );
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Table 1 analogue: every objective from the same warm-start');
  md.push('');
  const tableMethods = OBJECTIVE_METHODS;
  const header = [
    'Method',
    ...s.tasks.flatMap((t) => [`${t.id} pass@1`, `${t.id} avg@${k}`]),
    'Avg. pass@1',
    `Avg. avg@${k}`,
  ];
  const avgOver = (method: string, metric: Metric): number[] => {
    // Per seed, the average over tasks (seeds present in every task).
    const per = s.tasks.map((t) => ix.rl(t.id, method));
    const seeds = o.seeds.filter((sd) => per.every((rs) => rs.some((r) => r.seed === sd)));
    return seeds.map((sd) => mean(per.map((rs) => rs.find((r) => r.seed === sd)!.final[metric])));
  };
  const baseRow = [
    'Warm-start (no RL)',
    ...s.tasks.flatMap((t) => [
      pct(ix.warm(t.id).map((r) => r.eval.passAt1)),
      pct(ix.warm(t.id).map((r) => r.eval.avgAtK)),
    ]),
  ];
  const warmAvg = (metric: 'passAt1' | 'avgAtK'): string => {
    const seeds = o.seeds.filter((sd) => s.tasks.every((t) => ix.warm(t.id).some((r) => r.seed === sd)));
    return pct(seeds.map((sd) => mean(s.tasks.map((t) => ix.warm(t.id).find((r) => r.seed === sd)!.eval[metric]))));
  };
  baseRow.push(warmAvg('passAt1'), warmAvg('avgAtK'));
  const rows = tableMethods.map((m) => [
    m.label,
    ...s.tasks.flatMap((t) => [pct(ix.values(t.id, m.id, 'passAt1')), pct(ix.values(t.id, m.id, 'avgAtK'))]),
    pct(avgOver(m.id, 'passAt1')),
    pct(avgOver(m.id, 'avgAtK')),
  ]);
  // Bold the best mean of each column among the methods.
  for (let col = 1; col < header.length; col++) {
    const means = rows.map((r) => Number.parseFloat(r[col]!));
    const best = Math.max(...means.filter(Number.isFinite));
    rows.forEach((r, i) => {
      if (means[i] === best) r[col] = `**${r[col]}**`;
    });
  }
  md.push(markdownTable(header, [baseRow, ...rows]));
  md.push('');
  md.push(`Differences from GRPO, paired by seed (mean of d_s in pts, its std, paired t; pass@1 | avg@${k}):`);
  md.push('');
  md.push(
    markdownTable(
      ['Method', ...s.tasks.flatMap((t) => [`${t.id} Δpass@1`, `${t.id} Δavg@${k}`])],
      tableMethods
        .filter((m) => m.id !== 'grpo')
        .map((m) => [
          m.label,
          ...s.tasks.flatMap((t) =>
            (['passAt1', 'avgAtK'] as const).map((metric) => {
              const c = ix.compare(t.id, m.id, 'grpo', final(metric));
              return c ? `${signedPts(c.meanDiff)} ± ${(100 * c.stdDiff).toFixed(1)} (t ${fmtT(c.t)})` : '–';
            }),
          ),
        ]),
    ),
  );
  md.push('');

  // Claims from Table 1.
  for (const metric of ['passAt1', 'avgAtK'] as const) {
    const name = metric === 'passAt1' ? 'pass@1' : `avg@${k}`;
    for (const t of s.tasks) {
      const c = ix.compare(t.id, 'conspo', 'grpo', final(metric));
      claims.push({
        claim: `ConSPO > GRPO, ${name}, ${t.id}`,
        paper: 'Table 1: 44.4 vs 40.0 avg.',
        here: describe(c),
        verdict: c ? verdict(c, noise(ix, t.id, 'grpo', metric, evalN([t.id]))) : 'n/a',
      });
    }
    // "Best average": ConSPO's rank on the task-average, and against the strongest baseline by that average.
    const plain = tableMethods.filter((m) => !m.bicc && m.advantage === 'group');
    const ranked = plain
      .map((m) => ({ m, v: mean(avgOver(m.id, metric)) }))
      .filter((x) => Number.isFinite(x.v))
      .sort((a, b) => b.v - a.v);
    const rank = ranked.findIndex((x) => x.m.id === 'conspo') + 1;
    const strongest = ranked.find((x) => x.m.id !== 'conspo');
    if (rank > 0 && strongest) {
      const a = avgOver('conspo', metric);
      const b = avgOver(strongest.m.id, metric);
      const c = a.length === b.length ? paired(a, b) : null;
      // The strongest other method is picked from these same results: its test passes 5% / (number of candidates).
      const v = c
        ? verdict(c, binomialSe(mean(b), evalN(s.tasks.map((t) => t.id))), 0.05 / (ranked.length - 1))
        : 'inconclusive';
      claims.push({
        claim: `ConSPO has the best task-average ${name} of the ${ranked.length} objectives`,
        paper: 'Table 1: best average, +1.6 over the strongest baseline',
        here: `rank ${rank} of ${ranked.length}; vs the strongest other (${strongest.m.label}, picked from these results, so tested at 5%/${ranked.length - 1}, t > ${tCritical(o.seeds.length - 1, 0.05 / (ranked.length - 1)).toFixed(2)}): ${describe(c)}`,
        verdict: !c
          ? 'n/a'
          : rank === 1 && v === 'holds'
            ? 'holds'
            : v === 'contradicted'
              ? 'contradicted'
              : 'inconclusive',
      });
    }
  }

  // Figure 1 right: reward curves.
  md.push('## Figure 1 (right) analogue: training reward');
  md.push('');
  const curvePoints = (task: string, methods: readonly Method[], window: number): IntervalPoint[] =>
    methods.flatMap((m) => {
      const runs = ix.rl(task, m.id);
      if (runs.length === 0) return [];
      const steps = runs[0]!.curve.map((p) => p.step);
      return steps.map((step, i) => {
        const ys = runs.map((r) => mean(r.curve.slice(Math.max(0, i - window + 1), i + 1).map((p) => p.reward)));
        return {
          panel: task,
          series: m.label,
          x: step,
          mean: mean(ys),
          lo: mean(ys) - std(ys),
          hi: mean(ys) + std(ys),
        };
      });
    });
  const grpoConspo = OBJECTIVE_METHODS.filter((m) => m.id === 'grpo' || m.id === 'conspo');
  const fig1 = s.tasks.flatMap((t) => curvePoints(t.id, grpoConspo, 5));
  if (fig1.length) {
    writeFig(
      'reward-curves.svg',
      await intervalChartSvg(
        'Training reward, GRPO vs ConSPO (5-step trailing mean; band: ± std over seeds)',
        'RL step',
        'reward',
        fig1,
        { style: 'band', xType: 'quantitative' },
      ),
    );
    md.push(`![Training reward curves](${fig('reward-curves.svg')})`);
    md.push('');
  }
  const diffPts: IntervalPoint[] = s.tasks.flatMap((t) => {
    const a = ix.rl(t.id, 'conspo');
    const b = ix.rl(t.id, 'grpo');
    const seeds = a.map((r) => r.seed).filter((sd) => b.some((r) => r.seed === sd));
    if (seeds.length === 0) return [];
    const smoothAt = (r: RlResult, i: number): number =>
      mean(r.curve.slice(Math.max(0, i - 4), i + 1).map((p) => p.reward));
    return a[0]!.curve.map((p, i) => {
      const d = seeds.map(
        (sd) => 100 * (smoothAt(a.find((r) => r.seed === sd)!, i) - smoothAt(b.find((r) => r.seed === sd)!, i)),
      );
      return {
        panel: t.id,
        series: 'ConSPO − GRPO',
        x: p.step,
        mean: mean(d),
        lo: mean(d) - std(d),
        hi: mean(d) + std(d),
      };
    });
  });
  if (diffPts.length) {
    writeFig(
      'reward-difference.svg',
      await intervalChartSvg(
        'Training reward, ConSPO − GRPO, paired by seed (pts; 5-step trailing mean; band: ± std over seeds)',
        'RL step',
        'Δ reward (pts)',
        diffPts,
        { style: 'band', xType: 'quantitative' },
      ),
    );
    md.push(`![Training reward difference](${fig('reward-difference.svg')})`);
    md.push('');
  }
  const allCurves = s.tasks.flatMap((t) =>
    curvePoints(
      t.id,
      OBJECTIVE_METHODS.filter((m) => !m.bicc && m.advantage === 'group'),
      5,
    ).map((p) => ({ ...p, lo: p.mean, hi: p.mean })),
  );
  if (allCurves.length) {
    writeFig(
      'reward-curves-all.svg',
      await intervalChartSvg(
        'Training reward of every objective (5-step trailing mean over seeds)',
        'RL step',
        'reward',
        allCurves,
        { style: 'band', xType: 'quantitative' },
      ),
    );
    md.push(`![Training reward of every objective](${fig('reward-curves-all.svg')})`);
    md.push('');
  }
  md.push(
    markdownTable(
      ['Method', ...s.tasks.flatMap((t) => [`${t.id} mean reward (all steps)`, `${t.id} mean reward (2nd half)`])],
      OBJECTIVE_METHODS.map((m) => [
        m.label,
        ...s.tasks.flatMap((t) => [pct(ix.rl(t.id, m.id).map(allReward)), pct(ix.rl(t.id, m.id).map(lateReward))]),
      ]),
    ),
  );
  md.push('');
  for (const t of s.tasks) {
    const c = ix.compare(t.id, 'conspo', 'grpo', lateReward);
    claims.push({
      claim: `ConSPO's training reward > GRPO's (2nd half of RL), ${t.id}`,
      paper: 'Figure 1 right: consistently higher',
      here: describe(c),
      verdict: c
        ? verdict(c, binomialSe(mean(ix.rl(t.id, 'grpo').map(lateReward)), (s.steps / 2) * s.promptsPerStep))
        : 'n/a',
    });
  }

  // Diagnostics from the runs' metrics.jsonl: how large the updates were before clipping, how often the ratio
  // clip was active, and how sharp ConSPO's contrast was.
  md.push("### What the objectives did (from each run's metrics.jsonl, mean over RL steps and seeds)");
  md.push('');
  const diag = (task: string, method: string, key: string): string => {
    const per = ix
      .rl(task, method)
      .map((r) => runMetric(r, key))
      .filter((x): x is number => x !== null);
    return per.length ? `${mean(per).toFixed(3)}` : '–';
  };
  const gap = (task: string, method: string): string => {
    const per = ix.rl(task, method).flatMap((r) => {
      const a = runMetric(r, 'score/pos_mean');
      const b = runMetric(r, 'score/neg_mean');
      return a === null || b === null ? [] : [a - b];
    });
    return per.length ? mean(per).toFixed(3) : '–';
  };
  md.push(
    markdownTable(
      [
        'Method',
        ...s.tasks.flatMap((t) => [
          `${t.id} grad norm before clip`,
          `${t.id} mean ratio`,
          `${t.id} clipped tokens`,
          `${t.id} P⁺ (ConSPO)`,
          `${t.id} s⁺ − s⁻`,
        ]),
      ],
      OBJECTIVE_METHODS.map((m) => [
        m.label,
        ...s.tasks.flatMap((t) => [
          diag(t.id, m.id, 'grad_norm'),
          diag(t.id, m.id, 'ratio/mean'),
          diag(t.id, m.id, 'clip_ratio/region_mean'),
          diag(t.id, m.id, 'contrastive/pos_prob_mean'),
          gap(t.id, m.id),
        ]),
      ]),
    ),
  );
  md.push('');
  md.push(
    "The gradient norm is that of the last minibatch of each step, before AdamW's clip to norm 1; the mean ratio is π_θ / π_old over its tokens (with BICC, π_θ scores the " +
      "rollout after the inserted context while π_old saw the plain prompt); clipped tokens is the fraction outside GRPO's clip region (GRPO family only); P⁺ is Eq. 11's probability of a positive against its group's negatives (1/(1 + N⁻) when all scores are equal); " +
      's⁺ − s⁻ is the gap between the mean length-normalised log-likelihood of positives and of negatives.',
  );
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  // Table 6, Figure 2 and the group sizes may run on fewer seeds than Table 1: their tables average the seeds they
  // ran on, ConSPO's and GRPO's rows included, so that every column of a table is over the same seeds.
  const studied = (seed: number): boolean =>
    [ABLATION_METHODS[0]!.id, sweepMethod('tau', s.tau[0]!).id, groupSizeMethods(s.groupSizes[0]!)[0]!.id].some((id) =>
      ix.rl(study.id, id).some((r) => r.seed === seed),
    );
  const sx = o.seeds.some(studied) ? new Index(results, o.seeds.filter(studied)) : ix;
  md.push(`## Table 6 analogue: ConSPO's ablations (${study.label}; ${seedList(sx.seeds)})`);
  md.push('');
  const ablRows = [OBJECTIVE_METHODS.find((m) => m.id === 'conspo')!, ...ABLATION_METHODS].map((m) => {
    const row = [
      m.id === 'conspo' ? 'ConSPO' : m.label,
      pct(sx.values(study.id, m.id, 'passAt1')),
      pct(sx.values(study.id, m.id, 'avgAtK')),
    ];
    if (m.id === 'conspo') return [...row, '', ''];
    const c1 = sx.compare(study.id, 'conspo', m.id, final('passAt1'));
    const c2 = sx.compare(study.id, 'conspo', m.id, final('avgAtK'));
    return [
      ...row,
      c1 ? `${signedPts(c1.meanDiff)} (t ${fmtT(c1.t)})` : '–',
      c2 ? `${signedPts(c2.meanDiff)} (t ${fmtT(c2.t)})` : '–',
    ];
  });
  md.push(
    markdownTable(['Variant', 'pass@1', `avg@${k}`, 'ConSPO − variant, pass@1', `ConSPO − variant, avg@${k}`], ablRows),
  );
  md.push('');
  md.push(
    'Variants: "w/o contrastive objective" is Eq. 8\'s linear score difference (`contrast: linear`); "w/o log-likelihood scores" uses the clipped-ratio scores of Eq. 7 (`score: clipped-ratio`); "w/o scheduled margin" sets m_t = 0; "w/ fixed margin" uses m_t = M from the first step.',
  );
  md.push('');
  const paperAbl: Record<string, string> = {
    'conspo-linear': '44.4 vs 42.7',
    'conspo-clipped': '44.4 vs 43.4',
    'conspo-nomargin': '44.4 vs 44.1',
    'conspo-fixedmargin': '44.4 vs 43.9',
  };
  for (const m of ABLATION_METHODS) {
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const c = sx.compare(study.id, 'conspo', m.id, final(metric));
      claims.push({
        claim: `${m.label} costs accuracy (${metric === 'passAt1' ? 'pass@1' : `avg@${k}`}, ${study.id})`,
        paper: `Table 6: ${paperAbl[m.id]}`,
        here: describe(c),
        verdict: c ? verdict(c, noise(ix, study.id, m.id, metric, evalN([study.id]))) : 'n/a',
      });
    }
  }

  // ---------------------------------------------------------------------------------------------------------
  md.push(`## Figure 2 analogue: ConSPO's sensitivity to τ, M and α (${study.label}; ${seedList(sx.seeds)})`);
  md.push('');
  const sweepPts: IntervalPoint[] = [];
  const sweepRows: string[][] = [];
  const params: [SweepParam, string][] = [
    ['tau', 'τ (temperature)'],
    ['margin', 'M (target margin)'],
    ['alpha', 'α (margin warmup)'],
  ];
  for (const [param, label] of params) {
    for (const value of s[param]) {
      const m = sweepMethod(param, value);
      const deltas: string[] = [];
      for (const metric of ['passAt1', 'avgAtK'] as const) {
        const c = sx.compare(study.id, m.id, 'conspo', final(metric));
        if (c) {
          sweepPts.push({
            panel: label,
            series: metric === 'passAt1' ? 'pass@1' : `avg@${k}`,
            x: value,
            mean: 100 * c.meanDiff,
            lo: 100 * (c.meanDiff - c.stdDiff),
            hi: 100 * (c.meanDiff + c.stdDiff),
          });
          deltas.push(m.id === 'conspo' ? '' : `${signedPts(c.meanDiff)} ± ${(100 * c.stdDiff).toFixed(1)}`);
        } else deltas.push('–');
      }
      sweepRows.push([
        label,
        String(value) + (value === CONSPO_PAPER[param] ? ' (paper)' : ''),
        pct(sx.values(study.id, m.id, 'passAt1')),
        pct(sx.values(study.id, m.id, 'avgAtK')),
        deltas[0]!,
        deltas[1]!,
        m.id,
      ]);
    }
  }
  if (sweepPts.length) {
    writeFig(
      'sweep.svg',
      await intervalChartSvg(
        `ConSPO parameter study on ${study.id}: change from τ 10, M 0.01, α 0.3 (paired by seed; mean ± std over seeds)`,
        'value',
        'Δ accuracy (pts)',
        sweepPts,
        {
          style: 'bars',
          xType: 'ordinal',
          width: 220,
          height: 220,
        },
      ),
    );
    md.push(`![Parameter study](${fig('sweep.svg')})`);
    md.push('');
  }
  md.push(
    markdownTable(
      ['Parameter', 'value', 'pass@1', `avg@${k}`, 'Δpass@1 vs paper setting', `Δavg@${k} vs paper setting`, 'run id'],
      sweepRows,
    ),
  );
  md.push('');
  md.push(
    'M = 0 under the cosine schedule is m_t = 0 at every step, the same computation as the "w/o scheduled margin" ablation, so that run is shared.',
  );
  md.push('');
  const sweepClaim = (param: SweepParam, worse: number, label: string, paper: string): void => {
    const ref = sweepMethod(param, CONSPO_PAPER[param]).id;
    const alt = sweepMethod(param, worse).id;
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const c = sx.compare(study.id, ref, alt, final(metric));
      claims.push({
        claim: `${label} (${metric === 'passAt1' ? 'pass@1' : `avg@${k}`})`,
        paper,
        here: describe(c),
        verdict: c ? verdict(c, noise(ix, study.id, alt, metric, evalN([study.id]))) : 'n/a',
      });
    }
  };
  const smallTau = Math.min(...s.tau);
  const bigM = Math.max(...s.margin);
  const bigAlpha = Math.max(...s.alpha);
  sweepClaim('tau', smallTau, `τ = ${smallTau} is worse than τ = 10`, 'Figure 2: small τ less stable');
  sweepClaim('margin', bigM, `M = ${bigM} is worse than M = 0.01`, 'Figure 2: large M drops');
  sweepClaim('alpha', bigAlpha, `α = ${bigAlpha} is worse than α = 0.3`, 'Figure 2: large α drops');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## BICC and RCC on top of GRPO and ConSPO');
  md.push('');
  const addOns: [string, string, string][] = [
    ['grpo+bicc', 'grpo', 'GRPO + BICC vs GRPO'],
    ['grpo+rcc', 'grpo', 'GRPO + RCC vs GRPO'],
    ['grpo+bicc+rcc', 'grpo', 'GRPO + BICC + RCC vs GRPO'],
    ['conspo+bicc', 'conspo', 'ConSPO + BICC vs ConSPO'],
  ];
  md.push(
    markdownTable(
      ['Comparison', ...s.tasks.flatMap((t) => [`${t.id} Δpass@1`, `${t.id} Δavg@${k}`])],
      addOns.map(([a, b, label]) => [
        label,
        ...s.tasks.flatMap((t) =>
          (['passAt1', 'avgAtK'] as const).map((metric) => {
            const c = ix.compare(t.id, a, b, final(metric));
            return c ? `${signedPts(c.meanDiff)} ± ${(100 * c.stdDiff).toFixed(1)} (t ${fmtT(c.t)})` : '–';
          }),
        ),
      ]),
    ),
  );
  md.push('');
  md.push(
    'RCC is not applied to ConSPO: ConSPO scores rollouts by their likelihood inside the group contrast and has no advantages for RCC to re-baseline (the trainer rejects the combination).',
  );
  md.push('');
  for (const t of s.tasks) {
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const c = ix.compare(t.id, 'grpo+bicc', 'grpo', final(metric));
      claims.push({
        claim: `BICC adds accuracy over GRPO (${metric === 'passAt1' ? 'pass@1' : `avg@${k}`}, ${t.id})`,
        paper: 'BICC: +0.8 (Qwen3-4B), +1.9 (Phi-4-mini) Math500',
        here: describe(c),
        verdict: c ? verdict(c, noise(ix, t.id, 'grpo', metric, evalN([t.id]))) : 'n/a',
      });
    }
  }
  // Weaker model: the task where the warm-start is weaker.
  const byStrength = [...s.tasks].sort(
    (a, b) => mean(ix.warm(a.id).map((r) => r.eval.passAt1)) - mean(ix.warm(b.id).map((r) => r.eval.passAt1)),
  );
  const weak = byStrength[0]!;
  const strong = byStrength[byStrength.length - 1]!;
  if (weak.id !== strong.id) {
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const gw = ix.compare(weak.id, 'grpo+bicc', 'grpo', final(metric));
      const gs = ix.compare(strong.id, 'grpo+bicc', 'grpo', final(metric));
      let c: PairedComparison | null = null;
      if (gw && gs && gw.diffs.length === gs.diffs.length) c = paired(gw.diffs, gs.diffs);
      claims.push({
        claim: `BICC's gain is larger where the policy is weaker (${weak.id} vs ${strong.id}, ${metric === 'passAt1' ? 'pass@1' : `avg@${k}`})`,
        paper: 'BICC: +1.9 on the weaker Phi-4-mini vs +0.8 on Qwen3-4B',
        here: c
          ? `gain ${signedPts(mean(gw!.diffs))} vs ${signedPts(mean(gs!.diffs))}; difference ${describe(c)}`
          : 'no runs',
        verdict: c ? verdict(c, binomialSe(0.5, evalN([weak.id, strong.id]))) : 'n/a',
      });
    }
  }

  // Group sizes.
  md.push(
    `### BICC and the group size (${study.label}; ${seedList(sx.seeds)}; prompts per step × G fixed at ${s.promptsPerStep * s.numGenerations})`,
  );
  md.push('');
  const gs = [...s.groupSizes, s.numGenerations].sort((a, b) => a - b);
  const gid = (g: number, bicc: boolean): string =>
    g === s.numGenerations ? (bicc ? 'grpo+bicc' : 'grpo') : groupSizeMethods(g)[bicc ? 1 : 0]!.id;
  const gRows = gs.map((g) => {
    const row = [`G = ${g} (${promptsFor({ ...OBJECTIVE_METHODS[0]!, numGenerations: g }, s)} prompts/step)`];
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const c = sx.compare(study.id, gid(g, true), gid(g, false), final(metric));
      row.push(
        pct(sx.values(study.id, gid(g, false), metric)),
        pct(sx.values(study.id, gid(g, true), metric)),
        c ? `${signedPts(c.meanDiff)} (t ${fmtT(c.t)})` : '–',
      );
    }
    return row;
  });
  md.push(
    markdownTable(
      ['Group size', 'GRPO pass@1', 'GRPO + BICC pass@1', 'Δ', `GRPO avg@${k}`, `GRPO + BICC avg@${k}`, 'Δ'],
      gRows,
    ),
  );
  md.push('');
  if (gs.length >= 2) {
    const lo = gs[0]!;
    const hi = gs[gs.length - 1]!;
    for (const metric of ['passAt1', 'avgAtK'] as const) {
      const a = sx.compare(study.id, gid(hi, true), gid(hi, false), final(metric));
      const b = sx.compare(study.id, gid(lo, true), gid(lo, false), final(metric));
      const c = a && b && a.diffs.length === b.diffs.length ? paired(a.diffs, b.diffs) : null;
      claims.push({
        claim: `BICC's gain grows with G (G=${hi} vs G=${lo}, ${metric === 'passAt1' ? 'pass@1' : `avg@${k}`})`,
        paper: 'BICC: G=2 +0.6, G=8 +1.9',
        here: c
          ? `gain ${signedPts(mean(a!.diffs))} vs ${signedPts(mean(b!.diffs))}; difference ${describe(c)}`
          : 'no runs',
        verdict: c ? verdict(c, binomialSe(0.5, evalN([study.id]))) : 'n/a',
      });
    }
  }

  if (s.contextTask) contextSection(md, claims, ix, s, study, s.contextTask, evalN);

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Gradient variance with and without RCC');
  md.push('');
  md.push(
    `At each point (the warm-started policy, and GRPO policies after ${s.variancePoints.filter((p) => p > 0).join(' and ')} RL steps trained with the grid's settings), ` +
      `one batch of ${s.variancePrompts} training prompts × G = ${s.numGenerations} is sampled (the same prompts at every point of a seed), split into ` +
      `${s.variancePrompts / s.varianceGroupsPerMinibatch} minibatches of ${s.varianceGroupsPerMinibatch} whole groups, and each minibatch's gradient of the GRPO loss ` +
      "with respect to every parameter (flattened) is computed twice on the same rollouts: with GRPO's group-normalised advantages and with RCC's. " +
      'The spread is tr Cov = (1/(M−1)) Σ_m ‖g_m − ḡ‖². "Weighted" is the importance-weighted estimator RCC\'s derivation assumes, w_i A_i ∇log π(o_i) with ' +
      "w = exp(δ) normalised to mean 1 in each group. At step 0 π_old = π_ref, so δ = 0 and RCC equals GRPO exactly (ratio 1 up to RCC's 1e-6 in the std): a check of the measurement, not a result.",
  );
  md.push('');
  const vRows: string[][] = [];
  const vPts: IntervalPoint[] = [];
  // Reductions per (task, seed), averaged over the points after step 0: the points of one seed share its warm-start
  // and prompts, so the (task, seed) pairs are the independent units of the test.
  const reductions = new Map<string, number[]>();
  const wReductions = new Map<string, number[]>();
  for (const t of s.tasks) {
    for (const point of s.variancePoints) {
      const v = ix.variance(t.id, point);
      if (v.length === 0) continue;
      const ratioOf = (f: (m: VarianceResult['measurement']) => number): number[] => v.map((r) => f(r.measurement));
      const ratio = ratioOf((m) => m.rcc.trace / m.grpo.trace);
      const ratioMean = ratioOf((m) => m.rccMean.trace / m.grpo.trace);
      const wratio = ratioOf((m) => m.weightedRcc.trace / m.weightedGrpo.trace);
      const oratio = ratioOf((m) => m.weightedOptimal.trace / m.weightedGrpo.trace);
      if (point > 0) {
        v.forEach((r, i) => {
          const key = `${t.id}/${r.seed}`;
          reductions.set(key, [...(reductions.get(key) ?? []), 1 - ratio[i]!]);
          wReductions.set(key, [...(wReductions.get(key) ?? []), 1 - wratio[i]!]);
        });
      }
      const e = (xs: number[]): string => `${mean(xs).toFixed(1)} ± ${std(xs).toFixed(1)}`;
      const f = (xs: number[], d = 2): string => `${mean(xs).toFixed(d)} ± ${std(xs).toFixed(d)}`;
      vRows.push([
        t.id,
        String(point),
        e(v.map((r) => r.measurement.grpo.trace)),
        e(v.map((r) => r.measurement.rcc.trace)),
        f(ratio),
        f(ratioMean),
        f(wratio),
        f(oratio),
        f(v.map((r) => r.measurement.meanAbsDelta)),
        f(v.map((r) => r.measurement.withinGroupDeltaStd)),
        f(v.map((r) => r.measurement.rewardDeltaCorrelation)),
        f(
          v.map((r) => r.measurement.meanBaselineShift),
          3,
        ),
        f(v.map((r) => r.measurement.mixedGroups)),
      ]);
      const band = (series: string, xs: number[]): IntervalPoint => ({
        panel: t.id,
        series,
        x: point,
        mean: mean(xs),
        lo: mean(xs) - std(xs),
        hi: mean(xs) + std(xs),
      });
      vPts.push(
        band("RCC (sum δ) / GRPO, trainer's estimator", ratio),
        band('RCC (mean δ) / GRPO', ratioMean),
        band('RCC / GRPO, weighted estimator', wratio),
        band('exact b* / GRPO, weighted estimator', oratio),
      );
    }
  }
  md.push(
    markdownTable(
      [
        'Task',
        'GRPO steps',
        'tr Cov, GRPO',
        'tr Cov, RCC',
        'RCC / GRPO',
        'RCC (mean δ) / GRPO',
        'weighted: RCC / GRPO',
        'weighted: b* / GRPO',
        'mean |δ|',
        'std of δ in groups',
        'corr(r, δ) in groups',
        '|b_RCC − mean r|',
        'mixed groups',
      ],
      vRows,
    ),
  );
  md.push('');
  md.push(
    "Ratios below 1 mean lower variance than GRPO's group-mean baseline; the paper's claim is a ratio of about 0.65.",
  );
  md.push('');
  if (vPts.length) {
    writeFig(
      'variance.svg',
      await intervalChartSvg(
        'Gradient variance relative to GRPO (tr Cov over minibatches; mean ± std over seeds)',
        'GRPO steps before the measurement',
        'variance ratio',
        vPts,
        { style: 'bars', xType: 'ordinal', width: 260, height: 220 },
      ),
    );
    md.push(`![Gradient variance ratio](${fig('variance.svg')})`);
    md.push('');
  }
  const reductionClaim = (byUnit: Map<string, number[]>, which: string): void => {
    const xs = [...byUnit.values()].map(mean);
    if (xs.length < 2) return;
    const m = mean(xs);
    const se = std(xs) / Math.sqrt(xs.length);
    const crit = tCritical95(xs.length - 1);
    const v: Verdict = m >= 0.2 && m - crit * se > 0 ? 'holds' : m + crit * se < 0.2 ? 'contradicted' : 'inconclusive';
    claims.push({
      claim: `RCC cuts gradient variance by about a third (${which}; per task and seed, mean over the points after step 0)`,
      paper: 'BICC paper: −31% to −37%',
      here: `reduction ${(100 * m).toFixed(1)}% ± ${(100 * std(xs)).toFixed(1)} (n = ${xs.length} task-seed pairs; one-sided 95% bounds ${(100 * (m - crit * se)).toFixed(1)}% … ${(100 * (m + crit * se)).toFixed(1)}%)`,
      verdict: v,
    });
  };
  reductionClaim(reductions, "trainer's estimator");
  reductionClaim(wReductions, 'importance-weighted estimator');
  md.push(
    'Variance verdict: **holds** when the mean reduction is at least 20% and its one-sided 95% lower bound is above 0; **contradicted** when the one-sided 95% upper bound is below 20% (a reduction of a third is excluded); inconclusive otherwise.',
  );
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## The claims, one by one');
  md.push('');
  md.push(
    markdownTable(
      ['Claim', 'Paper', 'Here', 'Verdict'],
      claims.map((c) => [c.claim, c.paper, c.here, c.verdict === 'n/a' ? 'not run' : VERDICT_TEXT[c.verdict]]),
    ),
  );
  md.push('');

  const readingPath = join(o.docs, 'results', `reading${suffix}.md`);
  md.push('## Reading');
  md.push('');
  md.push(existsSync(readingPath) ? readFileSync(readingPath, 'utf8').trim() : '_No reading written yet._');
  md.push('');

  // ---------------------------------------------------------------------------------------------------------
  md.push('## Cost');
  md.push('');
  const rlRuns = results.filter((r): r is RlResult => r.kind === 'rl' && o.seeds.includes(r.seed));
  const kinds: [string, Result[]][] = [
    ['warm-starts', results.filter((r) => r.kind === 'warmstart' && o.seeds.includes(r.seed))],
    ['RL runs without BICC', rlRuns.filter((r) => !r.method.bicc)],
    ['RL runs with BICC', rlRuns.filter((r) => r.method.bicc)],
    ['variance measurements', results.filter((r) => r.kind === 'variance' && o.seeds.includes(r.seed))],
  ];
  md.push(
    markdownTable(
      ['Jobs', 'count', 'CPU s (sum)', 'CPU s (mean)', 'wall s (mean)'],
      kinds.map(([label, rs]) => [
        label,
        String(rs.length),
        rs.reduce((t, r) => t + r.cpuSeconds, 0).toFixed(0),
        rs.length ? mean(rs.map((r) => r.cpuSeconds)).toFixed(1) : '–',
        rs.length ? mean(rs.map((r) => r.wallSeconds)).toFixed(1) : '–',
      ]),
    ),
  );
  md.push('');
  const totalCpu = results.filter((r) => o.seeds.includes(r.seed)).reduce((t, r) => t + r.cpuSeconds, 0);
  md.push(
    `Total CPU time of all jobs: ${(totalCpu / 60).toFixed(1)} min. Each job is one single-threaded process, so on an otherwise idle 2-core machine with \`--jobs 2\` ` +
      `the grid takes about total CPU / 2 = **${(totalCpu / 120).toFixed(0)} min** of wall time (plus the imbalance of the last jobs). Measured invocations of the runner:`,
  );
  md.push('');
  md.push(
    markdownTable(
      ['finished at', 'grids', 'jobs run', 'parallel', 'wall min', 'load average (1, 5, 15 min) at the end'],
      timing.map((t) => [
        t.at,
        t.grids.join(', '),
        String(t.jobs),
        String(t.jobsAtOnce),
        (t.wallSeconds / 60).toFixed(1),
        t.loadAverage.map((x) => x.toFixed(1)).join(', '),
      ]),
    ),
  );
  md.push('');
  md.push(
    'The machine these ran on was shared with other work (a load average above 2 on 2 cores means other processes were competing), so the measured wall time is ' +
      'longer than the grid takes alone; the CPU-time estimate above is what it would take on an idle machine.',
  );
  md.push('');

  writeFileSync(mdPath, md.join('\n'));
  written.unshift(mdPath);
  const summary = results
    .filter((r) => o.seeds.includes(r.seed))
    .map((r) =>
      r.kind === 'rl'
        ? {
            id: r.id,
            task: r.task,
            method: r.method.id,
            seed: r.seed,
            warmStart: r.warmStart,
            final: r.final,
            meanReward: allReward(r),
            cpuSeconds: r.cpuSeconds,
          }
        : r.kind === 'warmstart'
          ? { id: r.id, task: r.task, seed: r.seed, eval: r.eval, cpuSeconds: r.cpuSeconds }
          : {
              id: r.id,
              task: r.task,
              seed: r.seed,
              point: r.point,
              measurement: r.measurement,
              cpuSeconds: r.cpuSeconds,
            },
    );
  writeFileSync(join(figDir, 'summary.json'), JSON.stringify(summary, null, 1));
  written.push(join(figDir, 'summary.json'));
  return written;
}

/** Seeds for a heading: `seeds 0, 1, 2`. */
const seedList = (seeds: readonly number[]): string => `seed${seeds.length === 1 ? '' : 's'} ${seeds.join(', ')}`;

/** A task's warm-start in the protocol: its length, or its target and ceiling. */
const warmStartPlan = (t: TaskSpec): string =>
  t.warmStartUntil === null
    ? `${t.id}: ${t.warmStartSteps} steps`
    : `${t.id}: until greedy pass@1 on ${WARM_START_VALIDATION} training-split problems, the same for every seed and checked every ` +
      `${WARM_START_CHECK_EVERY} steps, reaches ${t.warmStartUntil}; at most ${t.warmStartSteps} steps`;

/** Steps taken by the warm-starts: mean ± std and range. */
const stepsOf = (xs: readonly number[]): string =>
  xs.length === 0 ? '–' : `${mean(xs).toFixed(0)} ± ${std(xs).toFixed(0)} (${Math.min(...xs)}–${Math.max(...xs)})`;

/** The claims whose power the pilot estimates: the paper's effect, and the paired difference that measures it. */
const POWER_CLAIMS: readonly {
  readonly claim: string;
  readonly paper: string;
  readonly effect: number;
  readonly a: string;
  readonly b: string;
  /** Comparisons picked from the results (the strongest of k baselines) are tested at 5% / (k - 1). */
  readonly bonferroni?: boolean;
}[] = [
  { claim: 'ConSPO > GRPO', paper: 'Table 1: 44.4 vs 40.0 avg.', effect: 0.04, a: 'conspo', b: 'grpo' },
  {
    claim: 'ConSPO > the strongest other objective',
    paper: 'Table 1: +1.6 over the strongest baseline',
    effect: 0.016,
    a: 'conspo',
    b: 'grpo',
    bonferroni: true,
  },
  { claim: 'GRPO + BICC > GRPO', paper: 'BICC: +0.8 (Qwen3-4B)', effect: 0.008, a: 'grpo+bicc', b: 'grpo' },
  { claim: 'GRPO + BICC > GRPO', paper: 'BICC: +1.9 (Phi-4-mini)', effect: 0.019, a: 'grpo+bicc', b: 'grpo' },
];

/**
 * "Power": from the pilot runs (their own seeds), the spread of each claim's paired difference, and the seeds the
 * verdict rule needs to say "holds" with 80% probability at the paper's effect (`seedsForPower`).
 */
function power(
  md: string[],
  s: ScaleSettings,
  pilot: Index,
  evalN: (tasks: readonly string[]) => number,
  seedsRun: string,
): void {
  md.push('## Power: how many seeds');
  md.push('');
  const study = s.studyTask;
  const grpo = pilot.rl(study, 'grpo');
  if (grpo.length < 2) {
    md.push('_No pilot runs yet (`--grid pilot`)._');
    md.push('');
    return;
  }
  const plainMethods = OBJECTIVE_METHODS.filter((m) => !m.bicc && m.advantage === 'group').length;
  const minEffect = binomialSe(mean(grpo.map((r) => r.final.passAt1)), evalN([study]));
  const rows = POWER_CLAIMS.map((c) => {
    const d = pilot.compare(study, c.a, c.b, final('passAt1'));
    const alpha = c.bonferroni ? 0.05 / (plainMethods - 1) : 0.05;
    if (!d) return [c.claim, c.paper, '–', '–', '–', '–'];
    const n = seedsForPower({ effect: c.effect, sd: d.stdDiff, minEffect, alpha });
    return [
      c.claim,
      c.paper,
      `${signedPts(d.meanDiff)} (sd ${(100 * d.stdDiff).toFixed(1)}, ${d.diffs.length} seeds)`,
      `${(100 * minEffect).toFixed(1)} pts`,
      c.bonferroni ? `5%/${plainMethods - 1}` : '5%',
      n === null
        ? c.effect <= minEffect
          ? 'never: the effect is below the minimum effect'
          : 'more than 1000'
        : String(n),
    ];
  });
  // RCC: the reduction of gradient variance per seed (mean over the points after step 0), judged by its own rule.
  const bySeed = new Map<number, number[]>();
  for (const point of s.variancePoints.filter((p) => p > 0))
    for (const r of pilot.variance(study, point))
      bySeed.set(r.seed, [...(bySeed.get(r.seed) ?? []), 1 - r.measurement.rcc.trace / r.measurement.grpo.trace]);
  const reductions = [...bySeed.values()].map(mean);
  for (const effect of [0.31, 0.37]) {
    const sd = std(reductions);
    const n = reductions.length >= 2 ? seedsForPower({ effect, sd, minEffect: 0.2, alpha: 0.05 }) : null;
    rows.push([
      'RCC cuts gradient variance',
      `BICC paper: −${Math.round(effect * 100)}%`,
      reductions.length >= 2
        ? `${(100 * mean(reductions)).toFixed(1)}% (sd ${(100 * sd).toFixed(1)}, ${reductions.length} seeds)`
        : '–',
      'a 20% reduction',
      '5%',
      n === null ? (reductions.length >= 2 ? 'more than 1000' : '–') : String(n),
    ]);
  }
  md.push(
    `Pilot: seeds ${s.pilotSeeds.join(', ')} (none of the report's), ${study}, the grid's settings: GRPO, ConSPO, GRPO + RCC and GRPO + BICC ` +
      `from each seed's warm-start, and RCC's variance measurement after ${s.variancePoints.filter((p) => p > 0).join(' and ')} GRPO steps. ` +
      "For each claim: the paper's effect, the pilot's paired difference (its mean and the std of one difference), the minimum effect " +
      "of the verdict rule (the binomial standard error of one evaluation at GRPO's pilot pass@1), the test's level, and the seeds with which " +
      "the rule says **holds** with 80% probability if the paper's effect is the true one (`seedsForPower` in `stats.ts`: the mean of n " +
      "differences must clear both the minimum effect and the t-test's cutoff; normal approximation).",
  );
  md.push('');
  md.push(
    markdownTable(
      [
        'Claim',
        'Paper',
        'Pilot difference, pass@1 (pts) or reduction',
        'Minimum effect',
        'Level',
        'Seeds for 80% power',
      ],
      rows,
    ),
  );
  md.push('');
  const reachable = rows.filter((r) => /^\d+$/.test(r[5]!));
  const need = Math.max(...reachable.map((r) => Number(r[5])));
  md.push(
    `**Plan.** ${s.plannedSeeds} seeds for Table 1 and the variance study. The pilot's spread asks for ` +
      `${reachable.map((r) => `${r[5]} (${r[0]}, ${r[1]})`).join(', ')}; ${s.plannedSeeds} leaves room for a pilot ` +
      `std that is too low (from ${grpo.length} seeds it may be off by a third) and gives ${need <= s.plannedSeeds ? 'each of them at least 80%' : 'less than 80%'} power. ` +
      "The other claims cannot be shown at any number of seeds with this evaluation: the paper's effect is below the minimum " +
      "effect, one evaluation's noise on the held-out set, so the rule can only call them inconclusive, or contradicted where the " +
      'truth is the other way. Table 6, Figure 2 and the group sizes make only such claims, so they ran on fewer seeds; ' +
      `the seeds behind each table: ${seedsRun}. The grid resumes with \`--resume-grid\` and more seeds.`,
  );
  md.push('');
}

/** A run's per-token BICC log-ratio at its first step with conditioned rows, and its mean over such steps. */
function logRatios(r: RlResult): { first: number; mean: number } | null {
  const xs = r.curve.flatMap((p) => (p.biccLogRatio === undefined ? [] : [p.biccLogRatio]));
  return xs.length ? { first: xs[0]!, mean: mean(xs) } : null;
}

/** "mean (min to max)" of a list of nats, or "–". */
const nats = (xs: readonly number[]): string =>
  xs.length ? `${mean(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)} to ${Math.max(...xs).toFixed(2)})` : '–';

/**
 * Issue 29: BICC's claims again where the policy has learned to read the inserted context (the `context` grid), both
 * readings of the ratio, beside the plain warm-start's rows; the log-ratio says which regime each row ran in.
 */
function contextSection(
  md: string[],
  claims: Claim[],
  ix: Index,
  s: ScaleSettings,
  plainTask: TaskSpec,
  ctxTask: TaskSpec,
  evalN: (tasks: readonly string[]) => number,
): void {
  const k = s.evalK;
  md.push(`### BICC where the policy reads its context (${ctxTask.label})`);
  md.push('');
  md.push(
    `The \`context\` grid repeats the BICC comparisons from a warm-start in which ${100 * (ctxTask.warmStartContextShare ?? 0)}% of the ` +
      "supervised examples carry, before the query, the context BICC inserts (BICC's own layout and separators: near " +
      'misses of the answer for a positive row, the worked solution for a negative one; `TrainConfig.warmStartContextShare`), ' +
      'so that the policy learns to solve the query whatever precedes it; the rest of the protocol is unchanged. The ' +
      "log-ratio is the per-token log π_old(o|q) − log π_old(o|c, q) over the conditioned rows' completion tokens, " +
      "recorded at every BICC step: near 0 the policy reads the context as the same task; the plain warm-start's runs " +
      "predate the record (–). Two readings of the ratio: the paper's, π_θ(o|c, q) / π_old(o|q), and the one the " +
      'authors\' code sets out to compute, π_θ(o|q) / π_old(o|c, q) ("conditioned π_old"); and two unilateral ' +
      "ablations of the paper's reading, BICC on the positive rows only (each under its group's negatives) or on the " +
      'negative rows only (each under its positives).',
  );
  md.push('');
  const warmRows = [plainTask, ctxTask].map((t) => {
    const w = ix.warm(t.id);
    return [
      t.label,
      `${w.length}`,
      pct(w.map((r) => r.eval.passAt1)),
      pct(w.map((r) => r.eval.avgAtK)),
      w.some((r) => r.stepsTaken !== undefined) ? mean(w.map((r) => r.stepsTaken ?? NaN)).toFixed(0) : '–',
    ];
  });
  md.push(markdownTable(['Warm-start', 'Seeds', 'held-out pass@1', `avg@${k}`, 'steps taken (mean)'], warmRows));
  md.push('');
  /** b's value minus a's, paired by seed over the seeds both have (null: none). */
  const pairedBySeed = <R extends { seed: number }>(
    ra: readonly R[],
    rb: readonly R[],
    f: (r: R) => number,
  ): PairedComparison | null => {
    const seeds = ra.map((r) => r.seed).filter((x) => rb.some((y) => y.seed === x));
    return seeds.length
      ? paired(
          seeds.map((x) => f(rb.find((r) => r.seed === x)!)),
          seeds.map((x) => f(ra.find((r) => r.seed === x)!)),
        )
      : null;
  };
  const warmDiff = pairedBySeed(ix.warm(plainTask.id), ix.warm(ctxTask.id), (r) => r.eval.passAt1);
  const grpoDiff = pairedBySeed(ix.rl(plainTask.id, 'grpo'), ix.rl(ctxTask.id, 'grpo'), (r) => r.final.passAt1);
  md.push(
    `The context-reading warm-start against the plain one, paired by seed: held-out pass@1 after the warm-start ${describe(warmDiff)}; ` +
      `after GRPO (no BICC) ${describe(grpoDiff)}.`,
  );
  md.push('');
  const rows: [TaskSpec, string, string, string][] = [
    [plainTask, 'grpo+bicc', 'grpo', 'GRPO + BICC vs GRPO'],
    [plainTask, 'conspo+bicc', 'conspo', 'ConSPO + BICC vs ConSPO'],
    [ctxTask, 'grpo+bicc', 'grpo', 'GRPO + BICC vs GRPO'],
    [ctxTask, 'grpo+bicc-old', 'grpo', 'GRPO + BICC (conditioned π_old) vs GRPO'],
    [ctxTask, 'conspo+bicc', 'conspo', 'ConSPO + BICC vs ConSPO'],
    [ctxTask, 'conspo+bicc-old', 'conspo', 'ConSPO + BICC (conditioned π_old) vs ConSPO'],
    [ctxTask, 'grpo+bicc-pos', 'grpo', 'GRPO + BICC on positives only vs GRPO'],
    [ctxTask, 'grpo+bicc-neg', 'grpo', 'GRPO + BICC on negatives only vs GRPO'],
  ];
  const table = rows.map(([t, a, b, label]) => {
    const c1 = ix.compare(t.id, a, b, final('passAt1'));
    const ck = ix.compare(t.id, a, b, final('avgAtK'));
    const tol = noise(ix, t.id, b, 'passAt1', evalN([t.id]));
    const ratios = ix.rl(t.id, a).flatMap((r) => {
      const x = logRatios(r);
      return x ? [x] : [];
    });
    return [
      t.id === ctxTask.id ? 'context-reading' : 'plain',
      label,
      c1 ? `${signedPts(c1.meanDiff)} ± ${(100 * c1.stdDiff).toFixed(1)} (t ${fmtT(c1.t)})` : '–',
      ck ? `${signedPts(ck.meanDiff)} ± ${(100 * ck.stdDiff).toFixed(1)}` : '–',
      c1 ? `${c1.diffs.filter((d) => d >= -tol).length}/${c1.diffs.length}` : '–',
      nats(ratios.map((x) => x.first)),
      nats(ratios.map((x) => x.mean)),
    ];
  });
  md.push(
    markdownTable(
      [
        'Warm-start',
        'Comparison',
        'Δpass@1 (pts)',
        `Δavg@${k}`,
        'seeds within noise or better',
        'log-ratio, first BICC step (nats)',
        'log-ratio, mean over steps',
      ],
      table,
    ),
  );
  md.push('');
  md.push(
    `"Within noise or better": seeds where BICC's pass@1 is at most one evaluation's binomial standard error (at the ` +
      "baseline's mean rate) below its baseline's. Log-ratios: mean over seeds (min to max).",
  );
  md.push('');
  // What the update saw in each regime (means over RL steps, then over seeds).
  const diagMean = (t: string, m: string, key: string): string => {
    const xs = ix.rl(t, m).flatMap((r) => {
      const v = runMetric(r, key);
      return v === null ? [] : [v];
    });
    return xs.length ? mean(xs).toFixed(3) : '–';
  };
  const diagRows: [TaskSpec, string, string][] = [
    [plainTask, 'grpo+bicc', 'GRPO + BICC'],
    [plainTask, 'conspo+bicc', 'ConSPO + BICC'],
    [ctxTask, 'grpo', 'GRPO'],
    [ctxTask, 'grpo+bicc', 'GRPO + BICC'],
    [ctxTask, 'grpo+bicc-old', 'GRPO + BICC (conditioned π_old)'],
    [ctxTask, 'conspo', 'ConSPO'],
    [ctxTask, 'conspo+bicc', 'ConSPO + BICC'],
    [ctxTask, 'conspo+bicc-old', 'ConSPO + BICC (conditioned π_old)'],
    [ctxTask, 'grpo+bicc-pos', 'GRPO + BICC on positives only'],
    [ctxTask, 'grpo+bicc-neg', 'GRPO + BICC on negatives only'],
  ];
  md.push(
    markdownTable(
      ['Warm-start', 'Method', 'mean ratio', 'clipped tokens', 'log-ratio, positives', 'log-ratio, negatives'],
      diagRows.map(([t, m, label]) => [
        t.id === ctxTask.id ? 'context-reading' : 'plain',
        label,
        diagMean(t.id, m, 'ratio/mean'),
        diagMean(t.id, m, 'clip_ratio/region_mean'),
        diagMean(t.id, m, 'bicc_log_ratio_pos'),
        diagMean(t.id, m, 'bicc_log_ratio_neg'),
      ]),
    ),
  );
  md.push('');
  md.push(
    "Means over RL steps, then seeds (each step's last minibatch for the ratio and the clipped share: π_θ over the π_old " +
      'of the reading; GRPO family only for the clipped share). ConSPO scores rollouts by their log-likelihood and never ' +
      'reads π_old, so under the conditioned-π_old reading, where the policy is scored on the plain prompt, BICC leaves ' +
      'its update exactly as it was.',
  );
  md.push('');
  for (const [a, b, what] of [
    ['grpo+bicc', 'grpo', 'BICC adds accuracy over GRPO'],
    ['grpo+bicc-old', 'grpo', 'BICC (conditioned π_old) adds accuracy over GRPO'],
    ['conspo+bicc', 'conspo', 'BICC adds accuracy over ConSPO'],
    ['conspo+bicc-old', 'conspo', 'BICC (conditioned π_old) adds accuracy over ConSPO'],
  ] as const) {
    const c = ix.compare(ctxTask.id, a, b, final('passAt1'));
    claims.push({
      claim: `${what} (pass@1, ${ctxTask.id}: a policy that reads its context)`,
      paper: 'BICC: +0.8 (Qwen3-4B), +1.9 (Phi-4-mini) Math500',
      here: describe(c),
      verdict: c ? verdict(c, noise(ix, ctxTask.id, b, 'passAt1', evalN([ctxTask.id]))) : 'n/a',
    });
  }
}

/** The held-out set of a task: its distinct prompts and n_eff = (Σ c)² / Σ c² over their draw counts c. */
function heldOutCounts(s: ScaleSettings, t: TaskSpec, n: number): { distinct: number; effective: number } {
  const cfg = parseTrainConfig(warmStartConfig(s, t, 0, 'unused'));
  if (E.isLeft(cfg)) throw cfg.left;
  const counts = new Map<string, number>();
  for (const p of heldOutProblems(taskFor(cfg.right), n, 1234)) counts.set(p.prompt, (counts.get(p.prompt) ?? 0) + 1);
  const c = [...counts.values()];
  return { distinct: c.length, effective: n ** 2 / c.reduce((acc, x) => acc + x * x, 0) };
}

/** The mean over RL steps of one metric of a run's metrics.jsonl, as exported (null when absent). */
const runMetric = (r: RlResult, key: string): number | null => (r as CompactResult).rlMetricMeans?.[key] ?? null;

export type { TaskSpec };
