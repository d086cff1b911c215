/**
 * The experiment runner: trains the same warm-started policies with every objective, ConSPO's ablations and
 * parameter sweep, the BICC group-size study, and measures gradient variance with and without RCC; then builds
 * docs/RESULTS.md and its plots from the result files alone.
 *
 *   npm run experiments                                     # the default grid (small scale, its planned seeds, 2 jobs)
 *   npm run experiments -- --grid objectives --seeds 0,1,2 --scale small --output runs/experiments-small
 *   npm run experiments -- --resume-grid                    # skip jobs whose result file exists
 *   npm run experiments -- --report-only                    # rebuild docs/RESULTS.md from docs/results/small
 *
 * Every job runs in its own Node process (`--jobs` at a time, each with a one-thread CPU backend), writes
 * `<output>/results/<job id>.json` and its run directory (metrics.jsonl, checkpoints) under `<output>/<job id>`.
 * Before the report is built, the results under `<output>` (if any) are exported, merged with those already there,
 * into the compact files committed under `<docs>/results/<scale>/` (`compact.ts`), and the report is built from
 * those alone: a fresh clone rebuilds the committed report, and `--report-only` with no results refuses to write.
 */
import { spawn } from 'node:child_process';
import { appendFileSync, createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { GRID_NAMES, SCALES, plan, type GridName, type Job, type Scale } from './grid.js';
import { readResult, resultPath, runJob } from './jobs.js';
import { buildReport, NoResultsError } from './report.js';
import { exportCompact, readTiming } from './compact.js';

const { values } = parseArgs({
  options: {
    grid: { type: 'string', default: 'all' },
    seeds: { type: 'string' },
    scale: { type: 'string', default: 'small' },
    output: { type: 'string' },
    jobs: { type: 'string', default: '2' },
    'resume-grid': { type: 'boolean', default: false },
    'report-only': { type: 'boolean', default: false },
    'no-report': { type: 'boolean', default: false },
    docs: { type: 'string', default: 'docs' },
    worker: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});

const usage = `usage: node dist/examples/experiments/run.js [--grid all|pilot,objectives,ablations,sweep,groups,variance,context] [--seeds 0,1,2 (default: the scale's planned seeds)]
  [--scale small|large] [--output DIR (default runs/experiments-<scale>)] [--jobs N (default 2)] [--resume-grid]
  [--report-only] [--no-report] [--docs DIR (default docs)]`;
if (values.help) {
  console.log(usage);
  process.exit(0);
}

function fail(message: string): never {
  console.error(`${message}\n${usage}`);
  process.exit(2);
}

const scale = values.scale as Scale;
if (!(scale in SCALES)) fail(`--scale must be small or large, got ${values.scale}`);
const settings = SCALES[scale];
const grids: GridName[] = values.grid === 'all' ? [...GRID_NAMES] : (values.grid.split(',') as GridName[]);
for (const g of grids) if (!GRID_NAMES.includes(g)) fail(`unknown grid ${g}`);
// By default the seeds the scale's power analysis asks for: 0 .. plannedSeeds - 1.
const seedsText = values.seeds ?? Array.from({ length: settings.plannedSeeds }, (_, i) => i).join(',');
const seeds = seedsText.split(',').map(Number);
if (seeds.some((x) => !Number.isSafeInteger(x))) fail(`--seeds must be integers, got ${seedsText}`);
const jobsAtOnce = Number(values.jobs);
if (!(Number.isInteger(jobsAtOnce) && jobsAtOnce >= 1)) fail(`--jobs must be a positive integer, got ${values.jobs}`);
const output = values.output ?? `runs/experiments-${scale}`;

const all = plan(settings, GRID_NAMES, seeds);

if (values.worker) {
  // A child process: run one job of the plan.
  const job = all.find((j) => j.id === values.worker);
  if (!job) fail(`no job ${values.worker} in the plan`);
  await runJob(job, settings, output);
  process.exit(0);
}

if (!values['report-only']) {
  const jobs = plan(settings, grids, seeds);
  const todo = values['resume-grid'] ? jobs.filter((j) => !existsSync(resultPath(output, j.id))) : jobs;
  console.log(
    `${jobs.length} jobs in the plan (${grids.join(', ')}; seeds ${seeds.join(', ')}; scale ${scale}); ${todo.length} to run, ${jobsAtOnce} at a time -> ${output}`,
  );
  const t0 = performance.now();
  await runAll(todo);
  const wall = (performance.now() - t0) / 1000;
  const record = {
    at: new Date().toISOString(),
    scale,
    grids,
    seeds,
    jobs: todo.length,
    jobsAtOnce,
    wallSeconds: wall,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? '',
    loadAverage: loadavg(),
  };
  mkdirSync(output, { recursive: true });
  appendFileSync(join(output, 'timing.jsonl'), `${JSON.stringify(record)}\n`);
  console.log(`grid done in ${(wall / 60).toFixed(1)} min wall`);
}

if (!values['no-report']) {
  const compactDir = join(values.docs, 'results', scale);
  const fresh = readTiming(output);
  const kept = readTiming(compactDir).filter((t) => !fresh.some((u) => u.at === t.at));
  const exported = existsSync(join(output, 'results')) ? exportCompact(output, compactDir, kept) : 0;
  if (exported > 0) console.log(`exported ${exported} results from ${output} to ${compactDir}`);
  try {
    const written = await buildReport({ results: compactDir, docs: values.docs, settings, seeds });
    console.log(`wrote ${written.join(', ')}`);
  } catch (e) {
    if (e instanceof NoResultsError) fail(`no report written: ${e.message}`);
    throw e;
  }
}

/** Run jobs in child processes, at most `jobsAtOnce` at a time, each once its dependencies have results. */
async function runAll(todo: readonly Job[]): Promise<void> {
  const pending = new Map(todo.map((j) => [j.id, j]));
  const failed = new Set<string>();
  const running = new Set<string>();
  // A dependency is met once its result file exists and it is not (re)running in this invocation.
  const ready = (j: Job): boolean =>
    j.deps.every((d) => !pending.has(d) && !running.has(d) && existsSync(resultPath(output, d)));
  const blocked = (j: Job): boolean => j.deps.some((d) => failed.has(d));
  let done = 0;
  const total = todo.length;
  const t0 = performance.now();
  await new Promise<void>((resolve) => {
    const pump = (): void => {
      for (const j of [...pending.values()]) {
        if (blocked(j)) {
          pending.delete(j.id);
          failed.add(j.id);
          console.log(`skip ${j.id}: a dependency failed`);
        }
      }
      for (const j of [...pending.values()]) {
        if (running.size >= jobsAtOnce) break;
        if (!ready(j)) continue;
        pending.delete(j.id);
        running.add(j.id);
        rmSync(resultPath(output, j.id), { force: true });
        const log = join(output, 'logs', `${j.id}.log`);
        mkdirSync(dirname(log), { recursive: true });
        const out = createWriteStream(log);
        const args = [
          process.argv[1]!,
          '--worker',
          j.id,
          '--scale',
          scale,
          '--seeds',
          seeds.join(','),
          '--output',
          output,
        ];
        const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
        child.stdout.pipe(out);
        child.stderr.pipe(out);
        const started = performance.now();
        child.on('close', (code) => {
          running.delete(j.id);
          done++;
          const secs = ((performance.now() - started) / 1000).toFixed(0);
          const at = ((performance.now() - t0) / 60000).toFixed(1);
          if (code === 0) {
            console.log(`[${done}/${total} ${at} min] ${j.id} (${secs} s)${summary(j)}`);
          } else {
            failed.add(j.id);
            console.log(`[${done}/${total} ${at} min] FAILED ${j.id} (exit ${code}); see ${log}:\n${tail(log)}`);
          }
          pump();
        });
      }
      if (pending.size === 0 && running.size === 0) resolve();
    };
    pump();
  });
  if (failed.size > 0) console.log(`${failed.size} jobs failed or were skipped: ${[...failed].join(', ')}`);
}

function summary(j: Job): string {
  const r = readResult(output, j.id);
  if (!r) return '';
  if (r.kind === 'warmstart')
    return `: pass@1 ${r.eval.passAt1.toFixed(3)}, avg@${r.eval.k} ${r.eval.avgAtK.toFixed(3)}`;
  if (r.kind === 'rl')
    return `: pass@1 ${r.warmStart.passAt1.toFixed(3)} -> ${r.final.passAt1.toFixed(3)}, avg@${r.final.k} ${r.warmStart.avgAtK.toFixed(3)} -> ${r.final.avgAtK.toFixed(3)}`;
  const m = r.measurement;
  return `: tr Cov grpo ${m.grpo.trace.toExponential(3)}, rcc ${m.rcc.trace.toExponential(3)} (ratio ${(m.rcc.trace / m.grpo.trace).toFixed(3)})`;
}

function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '';
  }
}
