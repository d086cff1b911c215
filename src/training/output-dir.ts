import {
  dirname,
  join,
  link,
  lstat,
  makeDirectories,
  readdir,
  readRegularFile,
  realpath,
  rename,
  resolve,
  rm,
  sep,
  stat,
  truncate,
  unlink,
  writeFile,
} from '../platform/files.js';
import { hostName, processAlive, processId, processTag } from '../platform/host.js';
import { RlvrError } from '../core/errors.js';
import { FileSystemError } from '../platform/errors.js';

/**
 * The run directory (`--output`): `metrics.jsonl`, `checkpoint` (a link to the newest whole checkpoint
 * generation), `reference` or, under LoRA, `base` and `adapter`, and `model`. It is checked before the run starts, so a bad path fails at once, in one line:
 * - it must be a directory we can create and write, and no other run may be using it: the run takes an exclusive
 *   lock (`.rlvr-lock`, holding its pid and host) before anything else, released when the run ends; a lock left by a
 *   dead process of this machine is recovered;
 * - a non-empty directory is refused unless it is the run being resumed (`--resume DIR/checkpoint` with
 *   `--output DIR`) or `overwrite` is set (its contents are then deleted, but never what the run reads: a
 *   --model, --dataset or --resume inside it, the target of a link, or anything a run does not write is refused);
 * - an existing `checkpoint` entry that is not a directory (or a link to one) is refused.
 * Resuming into its own directory cuts `metrics.jsonl` back to the checkpoint's length, so the resumed steps
 * replace the lines the interrupted run wrote after it.
 */
export class OutputDirError extends RlvrError {
  constructor(
    readonly path: string,
    detail: string,
  ) {
    super(`--output ${path}: ${detail}`);
  }
}

export const METRICS_FILE = 'metrics.jsonl';

const fsError =
  (path: string) =>
  (e: unknown): never => {
    throw FileSystemError.from(path, e);
  };

/** Whether `output` is the directory the resumed checkpoint lives in. */
export const resumesInPlace = (output: string, resume: string | null): boolean =>
  resume !== null && resolve(dirname(resume)) === resolve(output);

/**
 * What a run writes into its directory (and nothing else may be deleted by --overwrite); `curves.svg` and
 * `summary.json` are what `rlvr train --output` and the main job write beside the metrics (src/cli/run-report.ts).
 */
const RUN_ENTRY =
  /^(metrics\.jsonl|curves\.svg|summary\.json|(checkpoint|reference|base|adapter|model)(\.(gen|link)-\d+|\.(tmp|old)-[\w.-]+)?|\.write-probe-\d+|\.rlvr-lock(\.[\w-]+)?)$/;

/** Whether `path` is `dir` or inside it. */
const within = (path: string, dir: string): boolean =>
  path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep);

const real = (path: string): Promise<string> => realpath(path).catch(() => resolve(path));

/** A file the run reads, by the flag that names it. */
export type RunInput = readonly [flag: string, path: string | null];

/**
 * Why `--overwrite` may not empty `output`, or null: a link (its target would be emptied), an input of the run
 * inside it (by path or after following links), or an entry a run does not write (a wrong --output).
 */
async function overwriteRefusal(
  output: string,
  entries: readonly string[],
  inputs: readonly RunInput[],
): Promise<string | null> {
  if ((await lstat(output).catch(fsError(output))).isSymbolicLink())
    return 'is a symbolic link: --overwrite would empty its target; give the directory itself';
  const [dir, dirReal] = [resolve(output), await real(output)];
  for (const [flag, path] of inputs) {
    if (path !== null && (within(resolve(path), dir) || within(await real(path), dirReal)))
      return `holds ${flag} ${quote(path)}, which this run reads: --overwrite would delete it; choose another --output`;
  }
  const foreign = entries.filter((e) => !RUN_ENTRY.test(e));
  if (foreign.length > 0) {
    const shown = foreign.slice(0, 3).map(quote).join(', ');
    return (
      `holds ${shown}${foreign.length > 3 ? ` and ${foreign.length - 3} more` : ''}, which a run does not write: ` +
      '--overwrite replaces only a previous run directory; choose another --output or move them'
    );
  }
  return null;
}

/** A path or name for a message, cut to a bounded length. */
const quote = (s: string): string => (s.length > 200 ? `${JSON.stringify(s.slice(0, 200))}...` : JSON.stringify(s));

/** The lock a run holds on its output directory while it runs (created whole, with O_EXCL semantics, by link). */
export const LOCK_FILE = '.rlvr-lock';

export interface OutputLock {
  /** Remove the lock if it is still this run's (idempotent; never throws). */
  release(): Promise<void>;
}

interface LockHolder {
  readonly pid: number;
  readonly host: string;
  readonly started?: string;
}

const holderOf = (text: string): LockHolder | null => {
  try {
    const j = JSON.parse(text) as Partial<LockHolder>;
    return Number.isSafeInteger(j.pid) && (j.pid as number) > 0 && typeof j.host === 'string'
      ? (j as LockHolder)
      : null;
  } catch {
    return null;
  }
};

/**
 * Take `output`'s lock: the holder's pid and host are written to a file of this process's own, which is then
 * hard-linked to the lock's name (atomic, and it fails if the name exists), so a lock is never seen half
 * written. A lock whose holder is a dead process of this machine is stale: it is renamed aside (atomic), checked to
 * be the stale one (else it is linked back: another run took the directory meanwhile) and removed, then taken
 * again. A live holder, one on another machine or an unreadable lock is an `OutputDirError` naming them.
 */
export async function acquireLock(output: string): Promise<OutputLock> {
  const path = join(output, LOCK_FILE);
  const mine = JSON.stringify({ pid: processId(), host: hostName(), started: new Date().toISOString() });
  const tmp = `${path}.${processTag()}`;
  await writeFile(tmp, mine).catch(fsError(output));
  try {
    for (let attempt = 0; attempt < 4; attempt++) {
      const taken = await link(tmp, path).then(
        () => true,
        (e: NodeJS.ErrnoException) => (e.code === 'EEXIST' ? false : fsError(path)(e)),
      );
      if (taken) return lockHandle(path, mine);
      const text = await readRegularFile(path, 'utf8').catch(() => null);
      if (text === null) continue; // released meanwhile
      const holder = holderOf(text);
      const here = holder?.host === hostName();
      if (!holder || !here || processAlive(holder.pid)) {
        const who = holder
          ? `process ${holder.pid}${here ? '' : ` on ${holder.host}`}${holder.started ? ` (since ${holder.started})` : ''}`
          : 'a lock it cannot read';
        throw new OutputDirError(
          output,
          `is in use by ${who}: its lock is ${path}; if no run is using the directory, delete the lock`,
        );
      }
      const aside = `${path}.stale-${processTag()}`;
      if (
        !(await rename(path, aside).then(
          () => true,
          () => false,
        ))
      )
        continue;
      const moved = await readRegularFile(aside, 'utf8').catch(() => null);
      // Another run replaced the stale lock between the read and the rename: give its lock back.
      if (moved !== text) await link(aside, path).catch(() => undefined);
      await unlink(aside).catch(() => undefined);
    }
    throw new OutputDirError(output, `could not take its lock ${path} (other runs keep taking it)`);
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

function lockHandle(path: string, mine: string): OutputLock {
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      const text = await readRegularFile(path, 'utf8').catch(() => null);
      if (text === mine) await unlink(path).catch(() => undefined);
    },
  };
}

/**
 * Check and prepare `output` (see the module comment) under its lock, which the caller releases when the run
 * ends. Every refusal comes before anything is deleted, and releases the lock.
 */
export async function prepareOutputDir(
  output: string,
  opts: { resume: string | null; overwrite: boolean; inputs?: readonly RunInput[] },
): Promise<OutputLock> {
  const st = await stat(output).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : fsError(output)(e)));
  if (st && !st.isDirectory()) throw new OutputDirError(output, 'exists and is not a directory');
  if (!st) await makeDirectories(output).catch(fsError(output));
  // Taking the lock also proves the directory writable.
  const lock = await acquireLock(output);
  try {
    const entries = (await readdir(output).catch(fsError(output))).filter((e) => e !== LOCK_FILE);
    if (entries.length > 0 && !resumesInPlace(output, opts.resume)) {
      if (!opts.overwrite) {
        throw new OutputDirError(
          output,
          `is not empty (${entries.length} entries); pass --overwrite to replace it, or --resume ${join(output, 'checkpoint')}`,
        );
      }
      // Nothing the run reads is deleted by it: checked whole before the first entry goes.
      const refusal = await overwriteRefusal(output, entries, [...(opts.inputs ?? []), ['--resume', opts.resume]]);
      if (refusal) throw new OutputDirError(output, refusal);
      for (const e of entries)
        await rm(join(output, e), { recursive: true, force: true }).catch(fsError(join(output, e)));
    }
    const ckpt = join(output, 'checkpoint');
    const c = await lstat(ckpt).catch(() => null);
    if (
      c &&
      !c.isDirectory() &&
      !(
        c.isSymbolicLink() &&
        (await stat(ckpt).then(
          (s) => s.isDirectory(),
          () => false,
        ))
      )
    ) {
      throw new OutputDirError(output, `${ckpt} exists and is not a checkpoint directory`);
    }
    return lock;
  } catch (e) {
    await lock.release();
    throw e;
  }
}

/** Cut `metrics.jsonl` back to `bytes` (its length when the checkpoint was saved). */
export async function truncateMetrics(output: string, bytes: number): Promise<void> {
  const path = join(output, METRICS_FILE);
  const size = await stat(path).then(
    (s) => s.size,
    () => 0,
  );
  if (size < bytes)
    throw new OutputDirError(output, `${path} has ${size} bytes, fewer than the ${bytes} it had at the checkpoint`);
  if (size > bytes) await truncate(path, bytes).catch(fsError(path));
}

/** The current length of `metrics.jsonl` (0 when absent), recorded with every checkpoint. */
export const metricsBytes = async (output: string | null): Promise<number> =>
  output
    ? stat(join(output, METRICS_FILE)).then(
        (s) => s.size,
        () => 0,
      )
    : 0;
