import { dirname, join, makeDirectories, readRegularFile, rename, writeFile } from '../../platform/files.js';
import { envVar, processTag, userCacheDir } from '../../platform/host.js';

/**
 * Kernels that tune themselves, per (adapter, kernel, shape class), as llama.cpp's WebGPU backend and gpu.cpp
 * do per device. A kernel family offers a few candidate configurations (tile sizes, work per thread, workgroup
 * shape) and names the class of a launch's shapes; the first time the backend meets a class it launches the
 * default (the first candidate, the fixed heuristic's pick) and queues a tuning job. The runtime runs the queue
 * at its next wait for the device (`read`, `sync`): at the end of the step that met the class, never inside
 * it, so a step's dispatches are its own and a warmed step measures no tuning. Each candidate first computes the
 * job's scratch problem and must agree with the default's result (a wrong or dropped candidate is rejected,
 * never chosen: tuning can only change speed), then is timed on the device; the fastest is kept for the class,
 * in memory and in a JSON file per adapter that later runs load instead of tuning again.
 *
 * RLVR_TUNE=off (or the runtime's `tune: false`) uses the defaults and tunes nothing (the specs run so, but
 * the tuning specs). The cache directory is RLVR_TUNE_CACHE, else `<user cache>/rlvr-wgpu/` (none in a page:
 * there the choices live in memory only). All file access goes through src/platform.
 */

/** What a tuning job needs of the device, for one candidate at a time (kernels/tune.ts makes one). */
export interface TuneTrial {
  /** Run the candidate once on the job's scratch inputs; its output on the host. */
  readonly result: (candidate: string) => Promise<Float32Array>;
  /** Milliseconds one run of the candidate takes on the device, over `reps` runs in a row. */
  readonly time: (candidate: string, reps: number) => Promise<number>;
  /** Whether a candidate's output agrees with the default's (the kernel's own tolerance). */
  readonly agree: (want: Float32Array, got: Float32Array) => boolean;
  /** Release the scratch buffers. */
  readonly dispose: () => void;
}

export interface TuneJob {
  /** The kernel family, as the cache and reports name it (`matmul`). */
  readonly kernel: string;
  /** The class of shapes the choice holds for (the kernel's own key: transposes, sizes by powers of two...). */
  readonly shapeClass: string;
  /** Candidate names; the first is the default (RLVR_TUNE=off's choice). */
  readonly candidates: readonly string[];
  /** The scratch problem the candidates are compared and timed on (made when the job runs). */
  readonly trial: () => TuneTrial;
}

/** One class's outcome, as the cache file stores it and benchmarks print it. */
export interface TuneChoice {
  readonly kernel: string;
  readonly shapeClass: string;
  readonly choice: string;
  /** The default candidate (RLVR_TUNE=off's choice), which the others are compared with. */
  readonly fallback: string;
  /** Milliseconds per run of each candidate timed (a rejected one is absent). */
  readonly ms: Readonly<Record<string, number>>;
  /** Candidates whose result disagreed with the default's. */
  readonly rejected: readonly string[];
  /** How the times were taken. */
  readonly timer: 'timestamp-query' | 'wall-clock';
}

export interface TunerOptions {
  /** Tune (default: unless the environment variable RLVR_TUNE is `off`). */
  readonly tune?: boolean;
  /** Where the per-adapter file lives (default: RLVR_TUNE_CACHE, else the user's cache dir); null: memory only. */
  readonly tuneCacheDir?: string | null;
}

/** Bumped when a kernel's candidates change meaning, so an older file is ignored rather than misread. */
const CACHE_VERSION = 2;
/** Milliseconds of device time a candidate is timed over (after a first run that sizes the repetitions). */
const TIME_BUDGET_MS = 15;
/**
 * Enough runs of a 10 us kernel to fill that budget: a device may quantise its timestamps (Dawn's timestamp
 * quantisation rounds to 100 us), which a batch of a few runs of a short kernel would not survive.
 */
const MAX_REPS = 256;

export class Tuner {
  readonly enabled: boolean;
  private readonly choices = new Map<string, TuneChoice>();
  private readonly queued = new Map<string, TuneJob>();
  private running = false;
  /** Jobs run in this process (a loaded choice is not one): what the specs assert. */
  tuned = 0;
  /** Milliseconds spent running them (benchmarks print it: a first run on a new adapter pays it once). */
  tuningMs = 0;
  private readonly file: string | null;
  /** Why the last save failed, if it did (reports print it). */
  saveError: string | null = null;

  constructor(
    private readonly adapter: string,
    private readonly timer: TuneChoice['timer'],
    opts: TunerOptions = {},
  ) {
    this.enabled = opts.tune ?? envVar('RLVR_TUNE') !== 'off';
    const dir =
      opts.tuneCacheDir !== undefined
        ? opts.tuneCacheDir
        : (envVar('RLVR_TUNE_CACHE') ?? (userCacheDir() === null ? null : join(userCacheDir()!, 'rlvr-wgpu')));
    this.file = this.enabled && dir ? join(dir, `${adapter.replace(/[^A-Za-z0-9._-]+/g, '_')}.json`) : null;
  }

  /** The cache file this adapter's choices are read from and written to (null: memory only). */
  get cacheFile(): string | null {
    return this.file;
  }

  /**
   * The candidate to launch for a job's class: the tuned one, or the default while the class is untuned (and
   * then the job is queued, once). With tuning off, always the default.
   */
  pick(job: TuneJob): string {
    const fallback = job.candidates[0]!;
    if (!this.enabled || job.candidates.length < 2) return fallback;
    const key = `${job.kernel}|${job.shapeClass}`;
    const hit = this.choices.get(key);
    if (hit) return job.candidates.includes(hit.choice) ? hit.choice : fallback;
    if (!this.queued.has(key)) this.queued.set(key, job);
    return fallback;
  }

  /** Whether jobs wait to run (the runtime runs them at its next wait for the device). */
  get due(): boolean {
    return this.queued.size > 0 && !this.running;
  }

  /** Run every queued job (re-entrant calls, from the trials' own reads, return at once), then save. */
  async run(): Promise<void> {
    if (!this.due) return;
    this.running = true;
    try {
      while (this.queued.size > 0) {
        const [key, job] = this.queued.entries().next().value as [string, TuneJob];
        this.queued.delete(key);
        const t0 = performance.now();
        this.choices.set(key, await this.tune(job));
        this.tuningMs += performance.now() - t0;
        this.tuned++;
      }
    } finally {
      this.running = false;
    }
    await this.save();
  }

  private async tune(job: TuneJob): Promise<TuneChoice> {
    const trial = job.trial();
    try {
      const fallback = job.candidates[0]!;
      const want = await trial.result(fallback);
      const ms: Record<string, number> = {};
      const rejected: string[] = [];
      for (const c of job.candidates) {
        if (c !== fallback && !trial.agree(want, await trial.result(c))) {
          rejected.push(c);
          continue;
        }
        // The first run includes the pipeline's creation: it only sizes the repetitions; the best of two
        // timed batches counts (another process's burst on a shared device slows one, never speeds it).
        const once = await trial.time(c, 1);
        const reps = Math.max(1, Math.min(MAX_REPS, Math.round(TIME_BUDGET_MS / Math.max(once, 1e-3))));
        ms[c] = Math.min(await trial.time(c, reps), await trial.time(c, reps));
      }
      const choice = Object.entries(ms).reduce((best, e) => (e[1] < best[1] ? e : best), [fallback, ms[fallback]!])[0];
      return { kernel: job.kernel, shapeClass: job.shapeClass, choice, fallback, ms, rejected, timer: this.timer };
    } finally {
      trial.dispose();
    }
  }

  /** Every class tuned or loaded so far, for reports (`bench:gpu` prints them). */
  report(): TuneChoice[] {
    return [...this.choices.values()];
  }

  /** Read this adapter's file, if there is one; a missing, unreadable or older file just means tuning again. */
  async load(): Promise<void> {
    if (!this.file) return;
    try {
      const saved = JSON.parse(await readRegularFile(this.file, 'utf8')) as CacheFile;
      if (saved.version !== CACHE_VERSION || saved.adapter !== this.adapter) return;
      for (const c of saved.choices) this.choices.set(`${c.kernel}|${c.shapeClass}`, c);
    } catch {
      // No file yet (or one a crash cut short): the classes are tuned when met.
    }
  }

  /** Write the choices (to a temporary name, then renamed, so a reader never sees half a file). */
  private async save(): Promise<void> {
    if (!this.file) return;
    const body: CacheFile = { version: CACHE_VERSION, adapter: this.adapter, choices: this.report() };
    try {
      await makeDirectories(dirname(this.file));
      const tmp = `${this.file}.${processTag()}.tmp`;
      await writeFile(tmp, `${JSON.stringify(body, null, 1)}\n`);
      await rename(tmp, this.file);
    } catch (e) {
      // An unwritable cache only costs tuning again next run; the choices stay in memory, the cause is kept.
      this.saveError = e instanceof Error ? e.message : String(e);
    }
  }
}

interface CacheFile {
  readonly version: number;
  readonly adapter: string;
  readonly choices: readonly TuneChoice[];
}
