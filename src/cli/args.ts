import * as E from 'fp-ts/lib/Either.js';
import { clipText } from '../core/errors.js';
import {
  LORA_LEARNING_RATE,
  LORA_TRAIN_DEFAULTS,
  TASK_NAMES,
  TRAIN_DEFAULTS,
  TrainConfigError,
  parseTrainConfig,
  type TrainConfig,
} from '../training/config.js';
import { OBJECTIVES, OBJECTIVE_NAMES } from '../objectives/registry.js';
import { TASKS } from '../tasks/registry.js';
import { BACKEND_NAMES } from '../backends/registry.js';
import { EXIT_CODE_HELP } from './exit-codes.js';
import { ENGINES, type Engine, type ExportArgs } from './export-config.js';
import { LORA_MODULES } from '../nn/lora.js';

/**
 * `rlvr train` options, named as TRL's GRPOConfig names them where it has the setting (--num-generations,
 * --epsilon, --epsilon-high, --beta, --loss-type, --scale-rewards, --temperature, --top-p,
 * --max-completion-length, --learning-rate, --num-iterations). Validated at the boundary: a bad value is a
 * `TrainConfigError` naming the flag, returned as an fp-ts Either.
 */
interface NumberFlag {
  readonly flag: string;
  readonly key: keyof TrainConfig | `model.${string}`;
  readonly help: string;
  /**
   * What the default means, after it: `(default 0: at the end only)`; or, starting with another value and a colon
   * or `0 `, what that value means: `(default 50; 0: only before and after RL)`.
   */
  readonly note?: string;
  /** The setting may be null, written `none`. */
  readonly none?: true;
}

const NUMBER_FLAGS: readonly NumberFlag[] = [
  { flag: 'seed', key: 'seed', help: 'random seed' },
  { flag: 'threads', key: 'threads', help: "cpu backend threads (default: RLVR_THREADS, else the machine's cores)" },
  { flag: 'steps', key: 'steps', help: 'RL steps' },
  { flag: 'prompts-per-step', key: 'promptsPerStep', help: 'prompts per RL step' },
  { flag: 'num-generations', key: 'numGenerations', help: 'G, completions per prompt' },
  { flag: 'temperature', key: 'temperature', help: 'sampling temperature' },
  { flag: 'top-p', key: 'topP', help: 'nucleus sampling mass' },
  { flag: 'max-completion-length', key: 'maxCompletionLength', help: 'most tokens per completion' },
  { flag: 'learning-rate', key: 'learningRate', help: 'RL peak learning rate' },
  { flag: 'num-iterations', key: 'numIterations', help: 'epochs over each batch of rollouts' },
  { flag: 'groups-per-minibatch', key: 'groupsPerMinibatch', help: "groups per minibatch (default: all of a step's)" },
  { flag: 'warmup-steps', key: 'warmupSteps', help: 'RL learning-rate warmup updates' },
  { flag: 'max-grad-norm', key: 'maxGradNorm', help: 'gradient clipping norm' },
  { flag: 'weight-decay', key: 'weightDecay', help: 'AdamW weight decay' },
  { flag: 'warm-start-steps', key: 'warmStartSteps', help: 'supervised warm-start steps', note: '0 with --model' },
  {
    flag: 'warm-start-until',
    key: 'warmStartUntil',
    help: 'end the warm-start once greedy pass@1 on 200 training-split problems (checked every 2 steps) reaches this',
    note: 'none: run every warm-start step',
    none: true,
  },
  { flag: 'warm-start-batch-size', key: 'warmStartBatchSize', help: 'worked solutions per warm-start step' },
  { flag: 'warm-start-learning-rate', key: 'warmStartLearningRate', help: 'warm-start peak learning rate' },
  {
    flag: 'warm-start-context-share',
    key: 'warmStartContextShare',
    help: "share of warm-start examples with BICC's context before the query",
  },
  { flag: 'eval-every', key: 'evalEvery', help: 'evaluate every N RL steps', note: '0: only before and after RL' },
  { flag: 'eval-prompts', key: 'evalPrompts', help: 'held-out prompts per evaluation' },
  { flag: 'eval-k', key: 'evalK', help: 'k of avg@k and pass@k' },
  {
    flag: 'checkpoint-every',
    key: 'checkpointEvery',
    help: 'save a checkpoint every N steps',
    note: 'at the end only',
  },
  { flag: 'bicc-context-share', key: 'biccContextShare', help: 'share of the context for inserted traces' },
  { flag: 'd-model', key: 'model.dModel', help: 'model width of a new model' },
  { flag: 'n-layers', key: 'model.nLayers', help: 'transformer layers of a new model' },
  { flag: 'n-heads', key: 'model.nHeads', help: 'attention heads of a new model' },
  { flag: 'n-kv-heads', key: 'model.nKvHeads', help: 'key/value heads (grouped-query) of a new model' },
  {
    flag: 'memory-limit-gb',
    key: 'memoryLimitGb',
    help: "refuse runs estimated above this (default: the host's memory)",
  },
];

/** Objective options: passed to the objective's own parser under these names. */
const OBJECTIVE_NUMBER_FLAGS: Readonly<Record<string, string>> = {
  epsilon: 'epsilon',
  'epsilon-high': 'epsilonHigh',
  beta: 'beta',
  tau: 'tau',
  margin: 'margin',
  alpha: 'alpha',
};
const OBJECTIVE_STRING_FLAGS: Readonly<Record<string, string>> = {
  'loss-type': 'lossType',
  'scale-rewards': 'scaleRewards',
};
const OBJECTIVE_HELP: Readonly<Record<string, [string, string]>> = {
  epsilon: ['X', 'lower clip of the ratio, 1 - epsilon (TRL epsilon)'],
  'epsilon-high': ['X', "upper clip, 1 + epsilon_high (DAPO's clip-higher)"],
  beta: ['X', 'KL coefficient to the reference, the starting model'],
  tau: ['X', "temperature of DisCO's and ConSPO's score contrast"],
  margin: ['X', "ConSPO's target margin M"],
  alpha: ['X', "ConSPO's margin warm-up, as a share of training"],
  'loss-type': ['NAME', 'aggregation grpo|dapo|dr_grpo|bnpo (TRL loss_type)'],
  'scale-rewards': ['MODE', 'advantage scaling group|batch|none (TRL scale_rewards)'],
};

const STRING_FLAGS = [
  ...['task', 'objective', 'backend', 'resume', 'output', 'advantage', 'rcc-delta', 'on-non-finite'],
  ...[
    'model',
    'dataset',
    'save-dtype',
    'bicc-placement',
    'bicc-ratio',
    'bicc-sides',
    'digits',
    'lora-target-modules',
    'adapter',
  ],
] as const;

/** LoRA's numbers, as peft names them (`r`, `lora_alpha`, `lora_dropout`); any LoRA flag turns LoRA on. */
const LORA_NUMBER_FLAGS: Readonly<Record<string, 'r' | 'alpha' | 'dropout'>> = {
  'lora-r': 'r',
  'lora-alpha': 'alpha',
  'lora-dropout': 'dropout',
};

/** The column descriptions start at (after two spaces and the flag with its placeholder). */
const COLUMN = 33;
const row = (flag: string, help: string): string => `  ${flag.padEnd(COLUMN - 3)} ${help}`;
const more = (text: string): string => `${' '.repeat(COLUMN)}${text}`;
const defaultOf = (key: NumberFlag['key']): unknown =>
  key.startsWith('model.')
    ? TRAIN_DEFAULTS.model[key.slice(6) as keyof TrainConfig['model']]
    : TRAIN_DEFAULTS[key as keyof TrainConfig];
const withDefault = (f: NumberFlag): string =>
  f.help.includes('(default')
    ? f.help
    : `${f.help} (default ${String(defaultOf(f.key))}${f.note ? `${/^(\S+:|0 )/.test(f.note) ? '; ' : ': '}${f.note}` : ''})`;
const d = TRAIN_DEFAULTS;

export const TRAIN_USAGE = [
  'usage: rlvr train [options]',
  '',
  'what to train:',
  row('--task NAME', `the built-in task (default ${d.task}), one of:`),
  ...TASK_NAMES.map((name) => more(`${name.padEnd(14)} ${TASKS[name].help}`)),
  row('--dataset FILE.jsonl', 'a task of {"prompt", "answer"} rows verified by \\boxed{} (default: --task)'),
  row('--objective NAME', `the policy objective (default ${d.objective}), one of:`),
  ...OBJECTIVE_NAMES.map((name) => more(`${name.padEnd(8)} ${OBJECTIVES[name].summary}`)),
  row('--advantage group|rcc', `the objective's own advantages, or RCC's baseline (default ${d.advantage})`),
  row('--rcc-delta sum|mean', `RCC's per-rollout log-ratio over tokens (default ${d.rccDelta})`),
  row('--bicc', 'score rollouts under bilateral context conditioning (off unless given)'),
  row('--bicc-placement WHERE', `BICC's traces before-query|after-query (default ${d.biccPlacement})`),
  row('--bicc-ratio SIDE', `BICC conditions conditioned-policy|conditioned-old (default ${d.biccRatio})`),
  row('--bicc-sides ROWS', `rows BICC conditions: both|positives|negatives (default ${d.biccSides})`),
  row('--model DIR', 'start from a Hugging Face model directory (default: a new model);'),
  more('--output then ends with OUTPUT/model, a directory transformers loads'),
  row('--allow-non-finite-weights', 'load weights holding NaN/Inf (off unless given: refused, exit 3)'),
  row('--digits N|A,B', `digits per operand of arithmetic tasks; A,B: first and second (default ${String(d.digits)})`),
  row('--backend NAME', `where tensors live, ${BACKEND_NAMES.join('|')} (default ${d.backend}; rlvr info)`),
  '',
  'LoRA (adapters on a frozen base, as peft; any of these turns it on, the rest take these defaults):',
  "a new model's warm-start trains every weight, then RL trains adapters on that base (the KL reference: the base,",
  'adapters off); with --model every phase trains adapters. Without --learning-rate, RL under LoRA runs at',
  `${LORA_LEARNING_RATE} (docs/results/lora/README.md: the rate the study on the main job picked).`,
  row('--lora-r N', `adapter rank (default ${LORA_TRAIN_DEFAULTS.r})`),
  row('--lora-alpha X', `scaling numerator: scaling = alpha / r (default ${LORA_TRAIN_DEFAULTS.alpha})`),
  row('--lora-dropout X', `dropout on the adapters' input while training (default ${LORA_TRAIN_DEFAULTS.dropout})`),
  row('--lora-target-modules LIST', "all-linear (the default) or some of these (peft's default: q_proj,v_proj):"),
  more(LORA_MODULES.join(',')),
  row('--use-rslora', 'scaling = alpha / sqrt(r) (rsLoRA; off unless given)'),
  row('--adapter DIR', 'continue from a saved adapter in peft layout (default: new adapters)'),
  row('--merge-lora', 'also write OUTPUT/model with the adapters merged (off unless given)'),
  row('--gradient-checkpointing', 'recompute each layer in the backward, keeping its input only (off unless given)'),
  '',
  'where it goes:',
  row('--output DIR', 'metrics.jsonl, checkpoints, OUTPUT/model (default: none, nothing saved)'),
  row('--resume DIR', 'continue from a checkpoint, e.g. OUTPUT/checkpoint (default: a new run)'),
  row('--overwrite', 'replace a previous run in --output (off unless given: refused unless resuming'),
  more("it; never deletes the run's inputs, a link's target, or files a run does not write)"),
  row('--save-dtype f32|bf16', `dtype of OUTPUT/model (default ${d.saveDtype})`),
  row(
    '--on-non-finite stop|skip',
    `a NaN/Inf loss or gradient norm ends the run or skips the update (default ${d.onNonFinite})`,
  ),
  '',
  'sizes and schedule:',
  ...NUMBER_FLAGS.map((f) => row(`--${f.flag} N`, withDefault(f))),
  '',
  "objective options (default: the objective's own):",
  ...[...Object.keys(OBJECTIVE_NUMBER_FLAGS), ...Object.keys(OBJECTIVE_STRING_FLAGS)].map((f) =>
    row(`--${f} ${OBJECTIVE_HELP[f]![0]}`, `${OBJECTIVE_HELP[f]![1]} (default: objective's)`),
  ),
  '',
  'exit status:',
  EXIT_CODE_HELP,
].join('\n');

/** Every flag `rlvr train` takes, without its dashes (each has one line in TRAIN_USAGE). */
export const TRAIN_FLAGS: readonly string[] = [
  ...STRING_FLAGS,
  'bicc',
  'overwrite',
  'allow-non-finite-weights',
  'use-rslora',
  'merge-lora',
  'gradient-checkpointing',
  ...Object.keys(LORA_NUMBER_FLAGS),
  ...NUMBER_FLAGS.map((f) => f.flag),
  ...Object.keys(OBJECTIVE_NUMBER_FLAGS),
  ...Object.keys(OBJECTIVE_STRING_FLAGS),
];

const BOOLEAN_FLAGS: ReadonlySet<string> = new Set([
  'bicc',
  'overwrite',
  'allow-non-finite-weights',
  'use-rslora',
  'merge-lora',
  'gradient-checkpointing',
]);
const VALUE_FLAGS: ReadonlySet<string> = new Set([
  ...NUMBER_FLAGS.map((x) => x.flag),
  ...Object.keys(LORA_NUMBER_FLAGS),
  ...Object.keys(OBJECTIVE_NUMBER_FLAGS),
  ...Object.keys(OBJECTIVE_STRING_FLAGS),
  ...STRING_FLAGS,
]);

/**
 * The command line as flags and values. Every option is `--name value` or `--name=value`; a value may start with
 * one dash (`--seed -1`, `--margin -0.1`: negative numbers are values), not with two (`--output --steps` is
 * a missing value; `--output=--odd` says it). An unknown flag, a stray argument, a missing or empty value, a
 * value given to a boolean flag and a flag given twice are each a `TrainConfigError` naming it; messages quote
 * at most a bounded prefix of what was typed.
 */
function scanArgs(argv: readonly string[]): E.Either<TrainConfigError, Map<string, string | true>> {
  const values = new Map<string, string | true>();
  const err = (field: string, value: unknown, why: string) => E.left(new TrainConfigError(field, value, why));
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (!token.startsWith('--') || token === '--')
      return err(
        token === '' ? '(an empty argument)' : clipText(token),
        null,
        'is not an option (options start with --; rlvr train --help lists them)',
      );
    const eq = token.indexOf('=');
    const name = token.slice(2, eq < 0 ? undefined : eq);
    const flag = `--${clipText(name)}`;
    let value: string | true;
    if (BOOLEAN_FLAGS.has(name)) {
      if (eq >= 0) return err(flag, token.slice(eq + 1), 'takes no value');
      value = true;
    } else if (VALUE_FLAGS.has(name)) {
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
    } else {
      return err(flag, null, 'is not an option of rlvr train (rlvr train --help lists them)');
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

export function parseTrainArgs(argv: readonly string[]): E.Either<TrainConfigError, TrainConfig> {
  const scanned = scanArgs(argv);
  if (E.isLeft(scanned)) return scanned;
  const values = Object.fromEntries(scanned.right) as Record<string, string | boolean | undefined>;
  const input: Record<string, unknown> = {};
  const model: Record<string, number> = {};
  const objectiveOptions: Record<string, unknown> = {};
  const num = (flag: string): E.Either<TrainConfigError, number | undefined> => {
    const raw = values[flag];
    if (raw === undefined) return E.right(undefined);
    const v = decimal(raw);
    return !Number.isFinite(v) ? E.left(new TrainConfigError(`--${flag}`, raw, 'is not a number')) : E.right(v);
  };
  for (const f of NUMBER_FLAGS) {
    if (f.none && values[f.flag] === 'none') {
      input[f.key] = null;
      continue;
    }
    const v = num(f.flag);
    if (E.isLeft(v)) return v;
    if (v.right === undefined) continue;
    if (f.key.startsWith('model.')) model[f.key.slice(6)] = v.right;
    else input[f.key] = v.right;
  }
  for (const [flag, key] of Object.entries(OBJECTIVE_NUMBER_FLAGS)) {
    const v = num(flag);
    if (E.isLeft(v)) return v;
    if (v.right !== undefined) objectiveOptions[key] = v.right;
  }
  for (const [flag, key] of Object.entries(OBJECTIVE_STRING_FLAGS))
    if (values[flag] !== undefined) objectiveOptions[key] = values[flag];
  const str = (flag: string): string | undefined => values[flag] as string | undefined;
  if (str('task')) input.task = str('task');
  if (str('objective')) input.objective = str('objective');
  if (str('backend')) input.backend = str('backend');
  if (str('resume')) input.resume = str('resume');
  if (str('output')) input.outputDir = str('output');
  if (str('advantage')) input.advantage = str('advantage');
  if (str('rcc-delta')) input.rccDelta = str('rcc-delta');
  if (str('model')) input.modelDir = str('model');
  if (str('dataset')) input.dataset = str('dataset');
  if (str('save-dtype')) input.saveDtype = str('save-dtype');
  if (values.bicc) input.bicc = true;
  if (str('bicc-placement')) input.biccPlacement = str('bicc-placement');
  if (str('bicc-ratio')) input.biccRatio = str('bicc-ratio');
  if (str('bicc-sides')) input.biccSides = str('bicc-sides');
  const digits = str('digits');
  if (digits !== undefined) {
    const parts = digits.split(',').map((x) => decimal(x.trim()));
    if (parts.some((x) => !Number.isFinite(x)))
      return E.left(new TrainConfigError('--digits', digits, 'is not N or A,B'));
    input.digits = parts.length === 1 ? parts[0] : parts;
  }
  const lora: Record<string, unknown> = {};
  for (const [flag, key] of Object.entries(LORA_NUMBER_FLAGS)) {
    const v = num(flag);
    if (E.isLeft(v)) return v;
    if (v.right !== undefined) lora[key] = v.right;
  }
  if (str('lora-target-modules')) lora.targetModules = str('lora-target-modules');
  if (values['use-rslora']) lora.useRslora = true;
  if (Object.keys(lora).length > 0) input.lora = lora;
  if (str('adapter')) input.adapter = str('adapter');
  if (values['merge-lora']) input.mergeLora = true;
  if (values['gradient-checkpointing']) input.gradientCheckpointing = true;
  if (values.overwrite) input.overwrite = true;
  if (values['allow-non-finite-weights']) input.allowNonFiniteWeights = true;
  if (str('on-non-finite')) input.onNonFinite = str('on-non-finite');
  if (Object.keys(model).length > 0) input.model = model;
  if (Object.keys(objectiveOptions).length > 0) input.objectiveOptions = objectiveOptions;
  return parseTrainConfig(input as Partial<TrainConfig>);
}

export const EXPORT_USAGE = [
  'usage: rlvr export-config --engine verl|prime-rl [--run DIR] [rlvr train options]',
  '',
  'Prints the configuration of another engine for the same objective and hyper-parameters, training with the',
  "Python package python/rlvr_objectives (the project's objectives, proved equal on golden batches) from",
  'OUTPUT/model, the Hub model a run wrote: verl, a shell script of Hydra overrides; prime-rl, a TOML file.',
  '',
  row('--engine verl|prime-rl', 'the engine (required)'),
  row('--run DIR', "a run's --output: its objective, options, advantage and BICC are read from DIR/checkpoint"),
  more('and the engine starts from DIR/model; the other settings come from the options below'),
  row('rlvr train options', 'as for rlvr train (rlvr train --help); without --run, the model is'),
  more('OUTPUT/model of --output, else --model'),
  '',
  'A setting with no equivalent in the engine is refused, naming its flag (exit 2).',
  '',
  'exit status:',
  EXIT_CODE_HELP,
].join('\n');

/** `rlvr train` flags that a run's checkpoint records (its identity): given with --run they would contradict it. */
const IDENTITY_FLAGS: readonly string[] = [
  ...['task', 'digits', 'dataset', 'objective', 'advantage', 'rcc-delta', 'bicc'],
  ...Object.keys(OBJECTIVE_NUMBER_FLAGS),
  ...Object.keys(OBJECTIVE_STRING_FLAGS),
];

/**
 * `rlvr export-config` arguments: `--engine` and `--run` (as `--name value` or `--name=value`), then every
 * `rlvr train` option, parsed as `rlvr train` parses them. With `--run`, a flag the run's checkpoint records is
 * refused (the run states its objective; the command would contradict it).
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
    const clash = rest.find((t) => IDENTITY_FLAGS.some((f) => t === `--${f}` || t.startsWith(`--${f}=`)));
    if (clash !== undefined)
      return E.left(
        new TrainConfigError(
          clipText(clash.split('=')[0]!),
          null,
          'is read from the run (--run): drop it from the command',
        ),
      );
  }
  return E.map((cfg: TrainConfig) => ({ engine: own.engine as Engine, run: own.run ?? null, cfg }))(
    parseTrainArgs(rest),
  );
}
