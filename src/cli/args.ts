import * as E from 'fp-ts/lib/Either.js';
import { clipText } from '../core/errors.js';
import type { LoraConfig } from '../nn/lora.js';
import {
  LORA_TRAIN_DEFAULTS,
  TRAIN_DEFAULTS,
  TrainConfigError,
  parseTrainConfig,
  type ModelSize,
  type TrainConfig,
} from '../training/config.js';
import { makeObjective } from '../objectives/registry.js';
import { EXIT_CODE_HELP } from './exit-codes.js';
import { inFlagTerms, typedFlagValue, type TypedFlags } from './flag-errors.js';
import { ENGINES, type Engine, type ExportArgs } from './export-config.js';
import {
  TRAIN_FLAG_BY_NAME,
  TRAIN_FLAG_SECTIONS,
  TRAIN_FLAG_TABLE,
  type FlagKind,
  type FlagTarget,
  type TrainFlag,
} from './train-flags.js';

export { TRAIN_FLAGS } from './train-flags.js';

/**
 * The command lines of `rlvr train` and `rlvr export-config`: their usage texts and their parsers. Both read
 * `rlvr train`'s flags from the one table in `train-flags.ts`. A bad argument is a `TrainConfigError` naming the
 * flag, returned as an fp-ts Either.
 */

/** The column help text starts at (after two spaces and the flag with its placeholder). */
const COLUMN = 33;
/** A help row: the flag with its placeholder, then its words in the column. */
const helpRow = (flag: string, help: string): string => `  ${flag.padEnd(COLUMN - 3)} ${help}`;
/** A line under a help row, in its column. */
const helpMore = (text: string): string => `${' '.repeat(COLUMN)}${text}`;

const configDefault = (target: FlagTarget): unknown => {
  const [record, key] = target.split('.') as [string, string | undefined];
  if (key === undefined) return TRAIN_DEFAULTS[record as keyof TrainConfig];
  if (record === 'lora') return LORA_TRAIN_DEFAULTS[key as keyof LoraConfig];
  return TRAIN_DEFAULTS.model[key as keyof ModelSize];
};

function helpWithDefault(f: TrainFlag): string {
  if (/default|off unless given/.test(f.help)) return f.help;
  if (f.sets.startsWith('objectiveOptions.')) return `${f.help} (default: objective's)`;
  // A note about another value than the default follows a semicolon; one about the default, a colon.
  const note = f.note === undefined ? '' : `${/^(\S+:|0 )/.test(f.note) ? '; ' : ': '}${f.note}`;
  return `${f.help} (default ${String(configDefault(f.sets))}${note})`;
}

const placeholder = (f: TrainFlag): string =>
  f.kind === 'switch' ? '' : ` ${f.arg ?? (f.kind === 'number' || f.kind === 'number-or-none' ? 'N' : 'VALUE')}`;

export const TRAIN_USAGE = [
  'usage: rlvr train [options]',
  ...TRAIN_FLAG_SECTIONS.flatMap((section) => [
    '',
    section.title,
    ...(section.intro ?? []),
    ...section.flags.flatMap((f) => [
      helpRow(`--${f.flag}${placeholder(f)}`, helpWithDefault(f)),
      ...(f.more ?? []).map(helpMore),
    ]),
  ]),
  '',
  'exit status:',
  EXIT_CODE_HELP,
].join('\n');

/**
 * What a command's scanner needs: how each of its flags reads (by name, without dashes), the command's name and
 * where its flags are listed, for messages (`rlvr train`, `rlvr train --help lists them`), and its error type.
 */
export interface CommandLine<Err> {
  readonly kindOf: (name: string) => FlagKind | undefined;
  readonly command: string;
  readonly listed: string;
  readonly error: (field: string, value: unknown, why: string) => Err;
}

const TRAIN_COMMAND_LINE: CommandLine<TrainConfigError> = {
  kindOf: (name) => TRAIN_FLAG_BY_NAME.get(name)?.kind,
  command: 'rlvr train',
  listed: 'rlvr train --help lists them',
  error: (field, value, why) => new TrainConfigError(field, value, why),
};

/**
 * The command line as flags and values. Every option is `--name value` or `--name=value`; a value may start with
 * one dash (`--seed -1`, `--margin -0.1`: negative numbers are values), not with two (`--output --steps` is
 * a missing value; `--output=--odd` says it). An unknown flag, a stray argument, a missing or empty value, a
 * value given to a boolean flag and a flag given twice are each an error naming it (`rlvr train`'s:
 * `TrainConfigError`); messages quote at most a bounded prefix of what was typed. The benchmarks' command lines
 * are scanned by it too.
 */
export function scanFlags<Err>(
  argv: readonly string[],
  line: CommandLine<Err>,
): E.Either<Err, Map<string, string | true>> {
  const values = new Map<string, string | true>();
  const err = (field: string, value: unknown, why: string) => E.left(line.error(field, value, why));
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (!token.startsWith('--') || token === '--')
      return err(
        token === '' ? '(an empty argument)' : clipText(token),
        null,
        `is not an option (options start with --; ${line.listed})`,
      );
    const eq = token.indexOf('=');
    const name = token.slice(2, eq < 0 ? undefined : eq);
    const flag = `--${clipText(name)}`;
    const kind = line.kindOf(name);
    if (kind === undefined) return err(flag, null, `is not an option of ${line.command} (${line.listed})`);
    let value: string | true;
    if (kind === 'switch') {
      if (eq >= 0) return err(flag, token.slice(eq + 1), 'takes no value');
      value = true;
    } else {
      if (eq >= 0) value = token.slice(eq + 1);
      else {
        const next = argv[i + 1];
        if (next === undefined || next.startsWith('--'))
          return err(
            flag,
            null,
            `needs a value${next === undefined ? '' : ` (for one starting with --, write ${flag}=VALUE)`}`,
          );
        value = next;
        i++;
      }
      if (value === '') return err(flag, '', 'must not be empty');
    }
    if (values.has(name)) return err(flag, value, 'is given twice');
    values.set(name, value);
  }
  return E.right(values);
}

/**
 * A number written in decimal: an optional sign, digits with an optional fraction, an optional exponent (`12`,
 * `-0.5`, `.5`, `3e-4`). `Number` alone also reads `0x10`, `0b11`, `0o7`, `Infinity` and blanks as numbers (16, 3,
 * 7, ..., 0), so a mistyped flag would run with a value nobody wrote; anything else is NaN here.
 */
export const DECIMAL = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
export const decimal = (raw: string | boolean): number =>
  typeof raw === 'string' && DECIMAL.test(raw) ? Number(raw) : Number.NaN;

/** A flag's text as its setting (a switch's is true). */
function readFlag(f: TrainFlag, text: string | true): E.Either<TrainConfigError, unknown> {
  if (text === true || f.kind === 'text') return E.right(text); // a switch's text is true
  if (f.kind === 'number-or-none' && text === 'none') return E.right(null);
  if (f.kind === 'digits') {
    const parts = text.split(',').map((x) => decimal(x.trim()));
    return parts.some((x) => !Number.isFinite(x))
      ? E.left(new TrainConfigError(`--${f.flag}`, text, 'is not N or A,B'))
      : E.right(parts.length === 1 ? parts[0] : parts);
  }
  const n = decimal(text);
  return Number.isFinite(n) ? E.right(n) : E.left(new TrainConfigError(`--${f.flag}`, text, 'is not a number'));
}

/** Sets `target` in the config input, creating the record it names (`lora`, `model`, `objectiveOptions`). */
function setTarget(input: Record<string, unknown>, target: FlagTarget, value: unknown): void {
  const [key, inner] = target.split('.') as [string, string | undefined];
  if (inner === undefined) input[key] = value;
  else input[key] = { ...(input[key] as Record<string, unknown> | undefined), [inner]: value };
}

/**
 * The settings `argv` gives, each flag's text read as the table says, in the order typed (of two that do not
 * read, the first is named), before defaults and checks.
 */
export function trainInput(argv: readonly string[]): E.Either<TrainConfigError, Partial<TrainConfig>> {
  const scanned = scanFlags(argv, TRAIN_COMMAND_LINE);
  if (E.isLeft(scanned)) return scanned;
  const input: Record<string, unknown> = {};
  for (const [name, text] of scanned.right) {
    const flag = TRAIN_FLAG_BY_NAME.get(name)!; // the scan kept known flags only
    const value = readFlag(flag, text);
    if (E.isLeft(value)) return value;
    setTarget(input, flag.sets, value.right);
  }
  return E.right(input as Partial<TrainConfig>);
}

/**
 * The command line as a validated `TrainConfig`, with the flags typed and the settings given: `trainInput`, then
 * `parseTrainConfig` fills the defaults and checks the settings, and its error is stated in flags (`inFlagTerms`).
 * `rlvr export-config` reads its train options so.
 */
function readTrainArgs(
  argv: readonly string[],
): E.Either<
  TrainConfigError,
  { readonly cfg: TrainConfig; readonly typed: TypedFlags; readonly given: Partial<TrainConfig> }
> {
  const scanned = scanFlags(argv, TRAIN_COMMAND_LINE);
  if (E.isLeft(scanned)) return scanned;
  const given = trainInput(argv);
  if (E.isLeft(given)) return given;
  const cfg = parseTrainConfig(given.right);
  return E.isLeft(cfg)
    ? E.left(inFlagTerms(cfg.left, scanned.right))
    : E.right({ cfg: cfg.right, typed: scanned.right, given: given.right });
}

/**
 * `rlvr train`'s arguments as a validated `TrainConfig` (`readTrainArgs`), refusing what `rlvr train` would
 * ignore or find wrong only once the run began: a flag given without the switch it needs (`--bicc-sides` without
 * `--bicc`: it would do nothing), and an objective option its objective refuses (before a backend opens).
 */
export function parseTrainArgs(argv: readonly string[]): E.Either<TrainConfigError, TrainConfig> {
  const read = readTrainArgs(argv);
  if (E.isLeft(read)) return read;
  const { cfg, typed } = read.right;
  for (const [name, text] of typed) {
    const flag = TRAIN_FLAG_BY_NAME.get(name)!;
    if (flag.needs !== undefined && !typed.has(flag.needs)) {
      const why = `needs --${flag.needs} (without it, it does nothing)`;
      return E.left(new TrainConfigError(`--${name}`, typedFlagValue(flag, text), why));
    }
  }
  const objective = makeObjective(cfg.objective, { ...cfg.objectiveOptions });
  if (E.isLeft(objective)) {
    const { field, value, reason } = objective.left;
    const why = reason.startsWith('unknown field')
      ? `is not an option of ${cfg.objective}`
      : `${reason} for ${cfg.objective}`;
    return E.left(inFlagTerms(new TrainConfigError(`objective.${field}`, value, why), typed));
  }
  return E.right(cfg);
}

/** A config error that ended `rlvr train` after its arguments were read (`setup`'s), stated in the flags typed. */
export function trainErrorInFlags(e: TrainConfigError, argv: readonly string[]): TrainConfigError {
  const scanned = scanFlags(argv, TRAIN_COMMAND_LINE);
  return E.isLeft(scanned) ? e : inFlagTerms(e, scanned.right);
}

export const EXPORT_USAGE = [
  'usage: rlvr export-config --engine verl|prime-rl [--run DIR] [rlvr train options]',
  '',
  'Prints the configuration of another engine for the same run, training with the Python package',
  "python/rlvr_objectives (the project's objectives, proved equal on golden batches) from a Hub model:",
  'verl, a bash script of Hydra overrides; prime-rl, a TOML file. Redirect it with npx rlvr (npm run adds',
  'its banner to standard output unless given -s).',
  '',
  helpRow('--engine verl|prime-rl', 'the engine (required)'),
  helpRow('--run DIR', "a run's --output: every setting its checkpoint records, and what it wrote:"),
  helpMore('DIR/model (a full or merged LoRA run), or its base and DIR/adapter (unmerged LoRA);'),
  helpMore('a flag given replaces its setting, except what the run is (task, objective, model, LoRA)'),
  helpRow('rlvr train options', 'as for rlvr train (rlvr train --help); without --run, the model is'),
  helpMore('OUTPUT/model of --output, else --model (with --adapter: --model and the adapter)'),
  '',
  'Every flag is carried, refused naming it (exit 2: a setting with no equivalent in the engine), or listed',
  'in the header\'s "not carried" line (local settings, the warm-start, the prompts: the data files hold them).',
  'Output that cannot be written (a full disk, a closed stdout) exits 3.',
  '',
  'exit status:',
  EXIT_CODE_HELP,
].join('\n');

/**
 * `rlvr train` flags that say what a run is, which its checkpoint records: given with --run they would
 * contradict it (the run states its task, objective, model and LoRA; its directory holds what it wrote).
 */
const RUN_FLAGS: readonly string[] = [
  ...['task', 'digits', 'dataset', 'objective', 'advantage', 'rcc-delta', 'bicc'],
  ...['model', 'adapter', 'output', 'resume', 'merge-lora'],
  ...TRAIN_FLAG_TABLE.filter((f) => f.sets.startsWith('objectiveOptions.') || f.sets.startsWith('lora.')).map(
    (f) => f.flag,
  ),
];

/**
 * `rlvr export-config` arguments: `--engine` and `--run` (as `--name value` or `--name=value`), then every
 * `rlvr train` option, parsed as `rlvr train` parses them (`given`: the settings typed, before defaults). With
 * `--run`, a flag saying what the run is (RUN_FLAGS) is refused: the run states it, the command would contradict it.
 */
export function parseExportArgs(argv: readonly string[]): E.Either<TrainConfigError, ExportArgs> {
  const own: Record<'engine' | 'run', string | undefined> = { engine: undefined, run: undefined };
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    const name = (['engine', 'run'] as const).find((n) => token === `--${n}` || token.startsWith(`--${n}=`));
    if (name === undefined) {
      rest.push(token);
      continue;
    }
    const eq = token.indexOf('=');
    const value = eq >= 0 ? token.slice(eq + 1) : argv[++i];
    if (value === undefined || value === '' || (eq < 0 && value.startsWith('--')))
      return E.left(new TrainConfigError(`--${name}`, null, 'needs a value'));
    if (own[name] !== undefined) return E.left(new TrainConfigError(`--${name}`, value, 'is given twice'));
    own[name] = value;
  }
  if (own.engine === undefined)
    return E.left(new TrainConfigError('--engine', null, `is required: one of ${ENGINES.join(', ')}`));
  if (!(ENGINES as readonly string[]).includes(own.engine))
    return E.left(new TrainConfigError('--engine', own.engine, `must be one of ${ENGINES.join(', ')}`));
  if (own.run !== undefined) {
    const clash = rest.find((t) => RUN_FLAGS.some((f) => t === `--${f}` || t.startsWith(`--${f}=`)));
    if (clash !== undefined)
      return E.left(
        new TrainConfigError(
          clipText(clash.split('=')[0]!),
          null,
          'is read from the run (--run): drop it from the command',
        ),
      );
  }
  return E.map(({ cfg, given }: { cfg: TrainConfig; given: Partial<TrainConfig> }) => ({
    engine: own.engine as Engine,
    run: own.run ?? null,
    cfg,
    given,
  }))(readTrainArgs(rest));
}
