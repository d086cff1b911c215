import * as E from 'fp-ts/lib/Either.js';
import { parseArgs } from 'node:util';
import {
  TASK_NAMES,
  TRAIN_DEFAULTS,
  TrainConfigError,
  parseTrainConfig,
  type TrainConfig,
} from '../training/config.js';
import { OBJECTIVES, OBJECTIVE_NAMES } from '../objectives/registry.js';
import { BACKEND_NAMES } from '../backends/registry.js';
import { EXIT_CODE_HELP } from './exit-codes.js';

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
}

const NUMBER_FLAGS: readonly NumberFlag[] = [
  { flag: 'seed', key: 'seed', help: 'random seed (default 0)' },
  { flag: 'digits', key: 'digits', help: 'digits per operand of arithmetic tasks' },
  { flag: 'steps', key: 'steps', help: 'RL steps (default 120)' },
  { flag: 'prompts-per-step', key: 'promptsPerStep', help: 'prompts per RL step (default 16)' },
  { flag: 'num-generations', key: 'numGenerations', help: 'G, completions per prompt (default 8)' },
  { flag: 'temperature', key: 'temperature', help: 'sampling temperature (default 1)' },
  { flag: 'top-p', key: 'topP', help: 'nucleus sampling mass (default 1)' },
  { flag: 'max-completion-length', key: 'maxCompletionLength', help: 'max completion tokens (default 8)' },
  { flag: 'learning-rate', key: 'learningRate', help: 'RL peak learning rate (default 1e-4)' },
  { flag: 'num-iterations', key: 'numIterations', help: 'epochs over each batch of rollouts (default 1)' },
  { flag: 'groups-per-minibatch', key: 'groupsPerMinibatch', help: 'groups per minibatch (default: all)' },
  { flag: 'warmup-steps', key: 'warmupSteps', help: 'RL learning-rate warmup updates (default 5)' },
  { flag: 'max-grad-norm', key: 'maxGradNorm', help: 'gradient clipping norm (default 1)' },
  { flag: 'weight-decay', key: 'weightDecay', help: 'AdamW weight decay (default 0)' },
  { flag: 'warm-start-steps', key: 'warmStartSteps', help: 'supervised warm-start steps' },
  { flag: 'warm-start-batch-size', key: 'warmStartBatchSize', help: 'warm-start examples per step (default 64)' },
  { flag: 'warm-start-learning-rate', key: 'warmStartLearningRate', help: 'warm-start peak learning rate' },
  { flag: 'eval-every', key: 'evalEvery', help: 'evaluate every N RL steps (0: before and after RL)' },
  { flag: 'eval-prompts', key: 'evalPrompts', help: 'held-out prompts (default 200)' },
  { flag: 'eval-k', key: 'evalK', help: 'k of avg@k and pass@k (default 4)' },
  { flag: 'checkpoint-every', key: 'checkpointEvery', help: 'save every N steps (0: at the end)' },
  { flag: 'bicc-context-share', key: 'biccContextShare', help: 'share of the context for inserted traces (0.4)' },
  { flag: 'd-model', key: 'model.dModel', help: 'model width' },
  { flag: 'n-layers', key: 'model.nLayers', help: 'transformer layers' },
  { flag: 'n-heads', key: 'model.nHeads', help: 'attention heads' },
  { flag: 'n-kv-heads', key: 'model.nKvHeads', help: 'key/value heads (grouped-query attention)' },
  { flag: 'memory-limit-gb', key: 'memoryLimitGb', help: 'refuse runs estimated above this (default: host memory)' },
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

const STRING_FLAGS = [
  ...['task', 'objective', 'backend', 'resume', 'output', 'advantage', 'rcc-delta', 'on-non-finite'],
  ...['model', 'dataset', 'save-dtype', 'bicc-placement'],
] as const;

const objectiveLines = OBJECTIVE_NAMES.map((name) => `      ${name.padEnd(8)} ${OBJECTIVES[name].summary}`).join('\n');

export const TRAIN_USAGE = `usage: rlvr train [options]

  --task ${TASK_NAMES.join('|')}   (default ${TRAIN_DEFAULTS.task})
  --objective NAME   (default ${TRAIN_DEFAULTS.objective}), one of:
${objectiveLines}
  --backend ${BACKEND_NAMES.join('|')}          --output DIR (metrics.jsonl, checkpoints)   --resume DIR
  --advantage group|rcc         --rcc-delta sum|mean      --bicc
  --bicc-placement before-query|after-query   where BICC inserts the traces (default before-query)
  --overwrite                   replace a non-empty --output directory (refused otherwise, unless resuming it)
  --on-non-finite stop|skip     a NaN/Inf loss or gradient norm ends the run (default) or skips that update
  --model DIR                   start from a Hugging Face model directory (config.json, safetensors, tokenizer.json);
                                --output then ends with OUTPUT/model, a directory transformers loads (warm-start 0)
  --dataset FILE.jsonl          {"prompt", "answer"} rows verified by \boxed{} (instead of --task)
  --save-dtype f32|bf16         dtype of OUTPUT/model (default f32)
${NUMBER_FLAGS.map((f) => `  --${f.flag.padEnd(26)} ${f.help}`).join('\n')}
  objective options: ${[...Object.keys(OBJECTIVE_NUMBER_FLAGS), ...Object.keys(OBJECTIVE_STRING_FLAGS)].map((f) => `--${f}`).join(' ')}

exit status:
${EXIT_CODE_HELP}`;

export function parseTrainArgs(argv: readonly string[]): E.Either<TrainConfigError, TrainConfig> {
  const options: Record<string, { type: 'string' | 'boolean' }> = {
    bicc: { type: 'boolean' },
    overwrite: { type: 'boolean' },
  };
  for (const f of [
    ...NUMBER_FLAGS.map((x) => x.flag),
    ...Object.keys(OBJECTIVE_NUMBER_FLAGS),
    ...Object.keys(OBJECTIVE_STRING_FLAGS),
    ...STRING_FLAGS,
  ])
    options[f] = { type: 'string' };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as Record<
      string,
      string | boolean | undefined
    >;
  } catch (e) {
    return E.left(new TrainConfigError('arguments', argv.join(' '), e instanceof Error ? e.message : String(e)));
  }
  const input: Record<string, unknown> = {};
  const model: Record<string, number> = {};
  const objectiveOptions: Record<string, unknown> = {};
  const num = (flag: string): E.Either<TrainConfigError, number | undefined> => {
    const raw = values[flag];
    if (raw === undefined) return E.right(undefined);
    const v = Number(raw);
    return raw === '' || !Number.isFinite(v)
      ? E.left(new TrainConfigError(`--${flag}`, raw, 'is not a number'))
      : E.right(v);
  };
  for (const f of NUMBER_FLAGS) {
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
  if (values.overwrite) input.overwrite = true;
  if (str('on-non-finite')) input.onNonFinite = str('on-non-finite');
  if (Object.keys(model).length > 0) input.model = model;
  if (Object.keys(objectiveOptions).length > 0) input.objectiveOptions = objectiveOptions;
  return parseTrainConfig(input as Partial<TrainConfig>);
}
