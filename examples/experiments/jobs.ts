/**
 * Running one job of the plan and writing its result file (`<output>/results/<job id>.json`). A job runs in its
 * own process (the runner starts one per job), so its wall and CPU time are its own.
 */
import { mkdirSync, renameSync, rmSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import {
  loadCheckpoint,
  parseTrainConfig,
  Rng,
  taskFor,
  tokenizerFor,
  train,
  type EvalResult,
  type MetricRecord,
  type TrainConfig,
} from '../../src/index.js';
import { rlConfig, warmStartConfig, warmStartId, type Job, type Method, type ScaleSettings } from './grid.js';
import { measureGradientVariance, type VarianceMeasurement } from './variance.js';

export interface Timing {
  readonly wallSeconds: number;
  /** User + system CPU seconds of the job's process: close to its wall time on an idle core. */
  readonly cpuSeconds: number;
}

/** What a training job ran on. */
interface RanOn {
  /**
   * `Backend.describe()` of the backend the job trained on: its name, kernels and thread count. Absent in results
   * written before the CPU backend's WebAssembly kernels (issue 18): those ran the TypeScript kernels, today's
   * `reference` backend, under the name `cpu`.
   */
  readonly backend?: string;
}

export interface WarmStartResult extends Timing, RanOn {
  readonly kind: 'warmstart';
  readonly id: string;
  readonly task: string;
  readonly seed: number;
  readonly config: Omit<TrainConfig, 'outputDir' | 'resume'>;
  readonly eval: EvalResult;
  /** Warm-start steps taken (fewer than config.warmStartSteps when warmStartUntil ended it; absent before it). */
  readonly stepsTaken?: number;
}

export interface CurvePoint {
  readonly step: number;
  readonly reward: number;
  readonly groupsMixed: number;
  readonly loss: number;
  readonly gradNorm: number;
  /** Under BICC: the step's per-token log pi_old(o|q) - log pi_old(o|c, q) on conditioned rows, and its mean |.|. */
  readonly biccLogRatio?: number;
  readonly biccAbsLogRatio?: number;
}

export interface RlResult extends Timing, RanOn {
  readonly kind: 'rl';
  readonly id: string;
  readonly task: string;
  readonly seed: number;
  readonly method: Method;
  readonly config: Omit<TrainConfig, 'outputDir' | 'resume'>;
  readonly warmStart: EvalResult;
  readonly final: EvalResult;
  readonly curve: readonly CurvePoint[];
  /** Seconds spent in RL steps (sampling + updates), from the trainer's records. */
  readonly rlSeconds: number;
}

export interface VarianceResult extends Timing {
  readonly kind: 'variance';
  readonly id: string;
  readonly task: string;
  readonly seed: number;
  readonly point: number;
  readonly policyRun: string | null;
  readonly measurement: VarianceMeasurement;
}

export type Result = WarmStartResult | RlResult | VarianceResult;

export const resultPath = (output: string, id: string): string => join(output, 'results', `${id}.json`);

export function readResult(output: string, id: string): Result | null {
  const p = resultPath(output, id);
  return existsSync(p) ? (JSON.parse(readFileSync(p, 'utf8')) as Result) : null;
}

function writeResult(output: string, result: Result): void {
  const p = resultPath(output, result.id);
  mkdirSync(dirname(p), { recursive: true });
  writeFileSync(`${p}.tmp`, JSON.stringify(result, null, 1));
  renameSync(`${p}.tmp`, p);
}

function parsed(input: Partial<TrainConfig>): TrainConfig {
  const cfg = parseTrainConfig(input);
  if (E.isLeft(cfg)) throw cfg.left;
  return cfg.right;
}

const strip = ({ outputDir: _o, resume: _r, ...rest }: TrainConfig): Omit<TrainConfig, 'outputDir' | 'resume'> => rest;

function timer(): () => Timing {
  const t0 = performance.now();
  const c0 = process.cpuUsage();
  return () => {
    const c = process.cpuUsage(c0);
    return { wallSeconds: (performance.now() - t0) / 1000, cpuSeconds: (c.user + c.system) / 1e6 };
  };
}

/** A run's directory: cleared first, so a rerun never appends to an old metrics.jsonl. */
function freshDir(dir: string): string {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  return dir;
}

export async function runJob(job: Job, s: ScaleSettings, output: string): Promise<Result> {
  const elapsed = timer();
  switch (job.kind) {
    case 'warmstart': {
      const dir = freshDir(join(output, job.id));
      const cfg = parsed(warmStartConfig(s, job.task, job.seed, dir));
      let stepsTaken = 0;
      const r = await train(cfg, { onRecord: (rec) => (stepsTaken += rec.phase === 'warmstart' ? 1 : 0) });
      const result: WarmStartResult = {
        kind: 'warmstart',
        id: job.id,
        task: job.task.id,
        seed: job.seed,
        config: strip(cfg),
        backend: r.backend.describe(),
        eval: r.warmStart!,
        stepsTaken,
        ...elapsed(),
      };
      writeResult(output, result);
      return result;
    }
    case 'rl': {
      const dir = freshDir(join(output, job.id));
      const cfg = parsed(
        rlConfig(s, job.task, job.method, job.seed, {
          resume: join(output, warmStartId(job.task, job.seed), 'checkpoint'),
          output: dir,
        }),
      );
      const records: MetricRecord[] = [];
      const r = await train(cfg, { onRecord: (rec) => records.push(rec) });
      const rl = records.filter((x) => x.phase === 'rl');
      const result: RlResult = {
        kind: 'rl',
        id: job.id,
        task: job.task.id,
        seed: job.seed,
        method: job.method,
        config: strip(cfg),
        backend: r.backend.describe(),
        warmStart: r.warmStart!,
        final: r.final,
        curve: rl.map((x) => ({
          step: x.step,
          reward: Number(x.reward),
          groupsMixed: Number(x.groups_mixed),
          loss: Number(x.loss),
          gradNorm: Number(x.grad_norm),
          ...(typeof x.bicc_log_ratio === 'number'
            ? { biccLogRatio: x.bicc_log_ratio, biccAbsLogRatio: Number(x.bicc_abs_log_ratio) }
            : {}),
        })),
        rlSeconds: rl.reduce((t, x) => t + Number(x.seconds), 0),
        ...elapsed(),
      };
      writeResult(output, result);
      return result;
    }
    case 'variance': {
      const warm = join(output, warmStartId(job.task, job.seed));
      const load = async (dir: string) => {
        const ck = await loadCheckpoint(dir)();
        if (E.isLeft(ck)) throw ck.left;
        return ck.right;
      };
      const reference = await load(join(warm, 'reference'));
      const policy = job.policyRun ? await load(join(output, job.policyRun, 'checkpoint')) : reference;
      const cfg = parsed(warmStartConfig(s, job.task, job.seed, warm));
      const task = taskFor(cfg);
      // The same prompts at every point of a seed: only the policy changes between points.
      const measurement = await measureGradientVariance(
        policy.params,
        reference.params,
        policy.config,
        tokenizerFor(task),
        task,
        new Rng(10_000 + job.seed),
        {
          prompts: s.variancePrompts,
          groupSize: s.numGenerations,
          groupsPerMinibatch: s.varianceGroupsPerMinibatch,
          maxNewTokens: s.maxCompletionLength,
          temperature: s.temperature,
        },
      );
      const result: VarianceResult = {
        kind: 'variance',
        id: job.id,
        task: job.task.id,
        seed: job.seed,
        point: job.point,
        policyRun: job.policyRun,
        measurement,
        ...elapsed(),
      };
      writeResult(output, result);
      return result;
    }
  }
}
