import * as E from 'fp-ts/lib/Either.js';
import { clipText, RlvrError } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import { checkOutputFile, writeVerlParquet, type VerlRow } from '../io/verl-parquet.js';
import { FileSystemError } from '../platform/errors.js';
import { join, makeDirectories, stat } from '../platform/files.js';
import type { DatasetProblem } from '../tasks/dataset.js';
import { sampleProblems, splitOf, type Problem, type Task } from '../tasks/task.js';
import type { TrainConfig } from '../training/config.js';
import { DATASET_LIMITS, loadDatasetTask } from '../training/pretrained.js';
import { heldOutFor, taskFor } from '../training/run.js';
import { parseTrainArgs } from './args.js';
import { EXIT, EXIT_CODE_HELP } from './exit-codes.js';

/**
 * `rlvr export-data`: the prompts of a task as verl's RL data (io/verl-parquet.ts), which prime-rl reads too through
 * the Python package's environment (python/rlvr_objectives/environment.py). The same prompts as `rlvr train`:
 * - held out (OUTPUT/test.parquet): the list `rlvr train` evaluates, in its order (`heldOutFor`: --eval-prompts
 *   from the task's held-out split, the same for every seed);
 * - training (OUTPUT/train.parquet): a built-in task's generator drawn from --seed on the training split,
 *   --steps x --prompts-per-step prompts (what a run of those settings consumes, and what verl's
 *   `total_training_steps` x `train_batch_size` reads, export-config's mapping); a dataset's training rows, each
 *   once, in file order (verl shuffles them each epoch).
 * Each prompt is one user message, its text as `rlvr train` gives it to a Hub model's chat template; the ground
 * truth is the answer the `\boxed{}` verifier compares (rlvr_objectives.boxed in verl and prime-rl).
 */

/** The files written in --output, named as verl's own preprocessing examples name theirs. */
export const DATA_FILES = { train: 'train.parquet', test: 'test.parquet' } as const;

/** The `rlvr train` flags that shape the data; every other one is refused (it would change nothing here). */
const DATA_FLAGS: readonly string[] = [
  ...['output', 'overwrite', 'task', 'digits', 'seed', 'steps', 'prompts-per-step', 'eval-prompts', 'dataset'],
];
/** Flags that choose among a built-in task's prompts, which a dataset does not draw. */
const BUILT_IN_ONLY: readonly string[] = ['task', 'digits', 'seed', 'steps', 'prompts-per-step'];

/** A command line export-data refuses, or a task it cannot carry: the flag and why. */
export class ExportDataError extends RlvrError {
  constructor(
    readonly flag: string,
    reason: string,
  ) {
    super(`${flag} ${reason}`);
  }
}

export const EXPORT_DATA_USAGE = [
  'usage: rlvr export-data --output DIR [--task NAME] [--digits N|A,B] [--seed N] [--steps N]',
  '                        [--prompts-per-step N] [--eval-prompts N] [--dataset FILE.jsonl] [--overwrite]',
  '',
  "Writes the task's prompts as verl parquet files, the same prompts, split and prompt text as rlvr train uses:",
  `  DIR/${DATA_FILES.train}  the training prompts: --steps x --prompts-per-step drawn from --seed (defaults`,
  "                 as rlvr train's), or every training row of --dataset",
  `  DIR/${DATA_FILES.test}   the held-out prompts rlvr train evaluates (--eval-prompts of them)`,
  'Columns: prompt (chat messages), data_source, ability, reward_model {style: rule, ground_truth}, extra_info',
  '{split, index, line}. verl reads them through RLVR_TRAIN_PARQUET and RLVR_VAL_PARQUET (rlvr export-config',
  '--engine verl); prime-rl through the taskset rlvr-boxed of python/ (python/README.md).',
  '',
  "The options are rlvr train's (rlvr train --help); an existing file is replaced only with --overwrite.",
  '',
  'exit status:',
  EXIT_CODE_HELP,
].join('\n');

/** `rlvr export-data`'s parsed arguments. */
export interface ExportDataArgs {
  readonly output: string;
  readonly overwrite: boolean;
  /** rlvr train's config of the flags given (defaults for the rest). */
  readonly cfg: TrainConfig;
}

/** The names of the flags typed (`--name` or `--name=value`; a value never starts with `--`). */
const flagsGiven = (argv: readonly string[]): string[] =>
  argv
    .filter((t) => t.startsWith('--') && t !== '--')
    .map((t) => t.slice(2, t.includes('=') ? t.indexOf('=') : undefined));

/**
 * The command line: rlvr train's flags that shape the data, parsed as rlvr train parses them. A flag that would
 * change nothing here is refused by name, and so is one that does not apply with --dataset.
 */
export function parseExportDataArgs(argv: readonly string[]): E.Either<RlvrError, ExportDataArgs> {
  const given = flagsGiven(argv);
  const foreign = given.find((f) => !DATA_FLAGS.includes(f));
  if (foreign !== undefined)
    return E.left(
      new ExportDataError(
        `--${clipText(foreign)}`,
        'is not an option of rlvr export-data (it takes --output, --overwrite, --task, --digits, --seed, --steps, ' +
          '--prompts-per-step, --eval-prompts, --dataset)',
      ),
    );
  if (given.includes('dataset')) {
    const clash = given.find((f) => BUILT_IN_ONLY.includes(f));
    if (clash !== undefined)
      return E.left(
        new ExportDataError(
          `--${clash}`,
          'does not apply with --dataset: its training rows are written once each, in file order (verl shuffles ' +
            'them with data.seed)',
        ),
      );
  }
  const cfg = parseTrainArgs(argv);
  if (E.isLeft(cfg)) return cfg;
  const { outputDir, overwrite } = cfg.right;
  if (outputDir === null)
    return E.left(
      new ExportDataError('--output', `is required: the directory of ${DATA_FILES.train} and ${DATA_FILES.test}`),
    );
  if (cfg.right.dataset === null && cfg.right.task === 'countdown')
    return E.left(
      new ExportDataError(
        '--task',
        'countdown is not exported: its verifier evaluates the boxed expression against the numbers and target, ' +
          'and the reward verl and prime-rl use (rlvr_objectives.boxed) compares the boxed answer with a ground truth',
      ),
    );
  return E.right({ output: outputDir, overwrite, cfg: cfg.right });
}

/** The task, its training prompts and its held-out prompts, as `rlvr train` would use them. */
export interface ExportedPrompts {
  readonly task: Task<Problem>;
  readonly train: readonly Problem[];
  readonly test: readonly Problem[];
  /** What the prompts are, for the summary line. */
  readonly description: string;
}

/** The prompts of the config's task (a dataset is read, and checked, as `rlvr train` reads it). */
export async function exportedPrompts(cfg: TrainConfig): Promise<ExportedPrompts> {
  if (cfg.evalPrompts > DATASET_LIMITS.rows)
    throw new ExportDataError('--eval-prompts', `${cfg.evalPrompts} is over the limit of ${DATASET_LIMITS.rows} rows`);
  if (cfg.dataset !== null) {
    const task = await loadDatasetTask(cfg.dataset);
    const train = task.rows.filter((p) => splitOf(p.prompt) === 'train');
    return { task, train, test: heldOutFor(task, cfg.evalPrompts), description: `the rows of ${cfg.dataset}` };
  }
  const n = cfg.steps * cfg.promptsPerStep;
  if (n > DATASET_LIMITS.rows)
    throw new ExportDataError(
      '--steps',
      `x --prompts-per-step is ${n} training prompts, over the limit of ${DATASET_LIMITS.rows} rows`,
    );
  const task = taskFor(cfg);
  const digits = cfg.digits === null ? '' : `, digits ${String(cfg.digits)}`;
  return {
    task,
    train: sampleProblems(task, n, new Rng(cfg.seed)),
    test: heldOutFor(task, cfg.evalPrompts),
    description: `${task.name}${digits}, seed ${cfg.seed}`,
  };
}

/** verl's rows for prompts of one split. */
export function verlRows(task: Task<Problem>, problems: readonly Problem[], split: 'train' | 'test'): VerlRow[] {
  const dataset = task.name === 'dataset';
  return problems.map((p, index) => ({
    dataSource: `rlvr/${task.name}`,
    prompt: [{ role: 'user', content: p.prompt }],
    ability: dataset ? 'boxed-answer' : 'math',
    groundTruth: p.answer,
    split,
    index,
    line: (p as Partial<DatasetProblem>).line ?? null,
  }));
}

const sameFile = async (a: string, b: string): Promise<boolean> => {
  try {
    const [x, y] = await Promise.all([stat(a), stat(b)]);
    return x.dev === y.dev && x.ino === y.ino;
  } catch {
    return false;
  }
};

/** The output directory, made if absent, and its two file names, checked before anything is written. */
async function prepareOutput(args: ExportDataArgs): Promise<{ train: string; test: string }> {
  const { output, overwrite, cfg } = args;
  try {
    // One level at a time: Node's recursive mkdir spins forever under /proc (platform/files.ts).
    await makeDirectories(output);
  } catch (e) {
    if (e instanceof FileSystemError && e.code === 'ENOTDIR')
      throw new ExportDataError('--output', `${output} is not a directory`);
    throw e instanceof FileSystemError ? e : FileSystemError.from(output, e);
  }
  const files = { train: join(output, DATA_FILES.train), test: join(output, DATA_FILES.test) };
  for (const path of Object.values(files)) {
    // What the command reads is never replaced, --overwrite or not.
    if (cfg.dataset !== null && (await sameFile(path, cfg.dataset)))
      throw new ExportDataError('--output', `${output}: ${path} is the --dataset file, which is never replaced`);
    await checkOutputFile(path, overwrite);
  }
  return files;
}

/** A path as a shell reads it back (quoted unless plain). */
const shellWord = (s: string): string => (/^[A-Za-z0-9_./,:=@+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Write the files; the lines to print. */
export async function exportData(args: ExportDataArgs): Promise<string[]> {
  const prompts = await exportedPrompts(args.cfg);
  const files = await prepareOutput(args);
  await writeVerlParquet(files.train, verlRows(prompts.task, prompts.train, 'train'), args.overwrite);
  await writeVerlParquet(files.test, verlRows(prompts.task, prompts.test, 'test'), args.overwrite);
  const [train, test] = [shellWord(files.train), shellWord(files.test)];
  return [
    `rlvr export-data: ${prompts.train.length} training prompts (${prompts.description}) in ${files.train}`,
    `rlvr export-data: ${prompts.test.length} held-out prompts in ${files.test}`,
    `  verl: RLVR_TRAIN_PARQUET=${train} RLVR_VAL_PARQUET=${test} bash SCRIPT (of rlvr export-config --engine verl)`,
    `  prime-rl: taskset id "rlvr-boxed" with data_file ${JSON.stringify(files.train)} (held out: ${JSON.stringify(files.test)})`,
  ];
}

/** `rlvr export-data ARGS`: the exit status (a failure after parsing is thrown, for main's one line). */
export async function runExportData(argv: readonly string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(EXPORT_DATA_USAGE);
    return EXIT.ok;
  }
  const args = parseExportDataArgs(argv);
  if (E.isLeft(args)) {
    console.error(`rlvr export-data: ${args.left.message}`);
    return EXIT.usage;
  }
  for (const line of await exportData(args.right)) console.log(line);
  return EXIT.ok;
}
