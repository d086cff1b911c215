import {
  dirname,
  join,
  lstat,
  mkdir,
  open,
  readdir,
  realpath,
  resolve,
  rm,
  sep,
  stat,
  truncate,
  unlink,
} from '../platform/files.js';
import { processTag } from '../platform/host.js';
import { RlvrError } from '../core/errors.js';
import { FileSystemError } from '../nn/atomic-dir.js';

/**
 * The run directory (`--output`): `metrics.jsonl`, `checkpoint` (a link to the newest whole checkpoint
 * generation) and `reference`. It is checked before the run starts, so a bad path fails at once, in one line:
 * - it must be a directory we can create and write (a probe file is written and removed);
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

/** What a run writes into its directory (and nothing else may be deleted by --overwrite). */
const RUN_ENTRY =
  /^(metrics\.jsonl|(checkpoint|reference|model)(\.(gen|link)-\d+|\.(tmp|old)-[\w.-]+)?|\.write-probe-\d+|\.rlvr-lock)$/;

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

export async function prepareOutputDir(
  output: string,
  opts: { resume: string | null; overwrite: boolean; inputs?: readonly RunInput[] },
): Promise<void> {
  const st = await stat(output).catch((e: NodeJS.ErrnoException) => (e.code === 'ENOENT' ? null : fsError(output)(e)));
  if (st && !st.isDirectory()) throw new OutputDirError(output, 'exists and is not a directory');
  if (st) {
    const entries = await readdir(output).catch(fsError(output));
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
  }
  await mkdir(output, { recursive: true }).catch(fsError(output));
  const probe = join(output, `.write-probe-${processTag()}`);
  const h = await open(probe, 'w').catch(fsError(output));
  await h.close();
  await unlink(probe).catch(fsError(probe));
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
