import { BACKEND_NAMES } from '../backends/registry.js';
import { LORA_MODULES, type LoraConfig } from '../nn/lora.js';
import { OBJECTIVES, OBJECTIVE_NAMES } from '../objectives/registry.js';
import { TASKS } from '../tasks/registry.js';
import {
  LORA_LEARNING_RATE,
  TASK_NAMES,
  TRAIN_DEFAULTS,
  type ModelSize,
  type TrainConfig,
} from '../training/config.js';

/**
 * The one table of `rlvr train`'s flags: what each sets, how its text is read, and its line in the help. The
 * scanner, the parser and `TRAIN_USAGE` all read it, so a new flag is one row here (and its setting in
 * `training/config.ts`). Flags are named as TRL's GRPOConfig names the setting where it has one (--num-generations,
 * --epsilon, --beta, --loss-type, --temperature, --learning-rate, ...).
 */

/**
 * How a flag's text becomes a setting: `text` as typed; `number` a decimal number; `number-or-none` one, or
 * `none` for null; `digits` `N` or `A,B`; `switch` takes no text, and giving it sets true.
 */
export type FlagKind = 'text' | 'number' | 'number-or-none' | 'digits' | 'switch';

/**
 * The setting a flag gives: a `TrainConfig` key, or a key of one of its records (`model.dModel`, `lora.r`,
 * `objectiveOptions.epsilon`). A flag of a record creates it (each LoRA flag turns LoRA on), and objective
 * options go to the objective's own parser, which validates them.
 */
export type FlagTarget =
  | Exclude<keyof TrainConfig, 'model' | 'lora' | 'objectiveOptions'>
  | `model.${keyof ModelSize}`
  | `lora.${keyof LoraConfig}`
  | `objectiveOptions.${string}`;

export interface TrainFlag {
  /** The flag without its dashes. */
  readonly flag: string;
  readonly sets: FlagTarget;
  readonly kind: FlagKind;
  /** The value's placeholder in the help (a number's is N unless given here; a switch has none). */
  readonly arg?: string;
  /**
   * The help line's words. Unless they state the default themselves (`default`, `off unless given`), the
   * default follows: an objective option's is the objective's, any other the config's at `sets`.
   */
  readonly help: string;
  /**
   * What the config's default means, after it: `(default 0: at the end only)`; or, starting with another value
   * and a colon or `0 `, what that value means: `(default 50; 0: only before and after RL)`.
   */
  readonly note?: string;
  /** Lines under the help line, in its column. */
  readonly more?: readonly string[];
  /** A switch this flag only means something with (`bicc`): given without it, `rlvr train` refuses the flag. */
  readonly needs?: string;
}

export interface FlagSection {
  /** The heading, ending in a colon. */
  readonly title: string;
  /** Lines between the heading and the flags. */
  readonly intro?: readonly string[];
  readonly flags: readonly TrainFlag[];
}

/** The flags in the help's sections and order. */
export const TRAIN_FLAG_SECTIONS: readonly FlagSection[] = [
  {
    title: 'what to train:',
    flags: [
      {
        flag: 'task',
        sets: 'task',
        kind: 'text',
        arg: 'NAME',
        help: `the built-in task (default ${TRAIN_DEFAULTS.task}), one of:`,
        more: TASK_NAMES.map((name) => `${name.padEnd(14)} ${TASKS[name].help}`),
      },
      {
        flag: 'dataset',
        sets: 'dataset',
        kind: 'text',
        arg: 'FILE.jsonl',
        help: 'a task of {"prompt", "answer"} rows verified by \\boxed{} (default: --task)',
      },
      {
        flag: 'objective',
        sets: 'objective',
        kind: 'text',
        arg: 'NAME',
        help: `the policy objective (default ${TRAIN_DEFAULTS.objective}), one of:`,
        more: OBJECTIVE_NAMES.map((name) => `${name.padEnd(8)} ${OBJECTIVES[name].summary}`),
      },
      {
        flag: 'advantage',
        sets: 'advantage',
        kind: 'text',
        arg: 'group|rcc',
        help: "the objective's own advantages, or RCC's baseline",
      },
      {
        flag: 'rcc-delta',
        sets: 'rccDelta',
        kind: 'text',
        arg: 'sum|mean',
        help: "RCC's per-rollout log-ratio over tokens",
      },
      {
        flag: 'bicc',
        sets: 'bicc',
        kind: 'switch',
        help: 'score rollouts under bilateral context conditioning (off unless given;',
        more: ['every --bicc-* option needs it)'],
      },
      {
        flag: 'bicc-placement',
        sets: 'biccPlacement',
        kind: 'text',
        arg: 'WHERE',
        help: "BICC's traces before-query|after-query",
        needs: 'bicc',
      },
      {
        flag: 'bicc-ratio',
        sets: 'biccRatio',
        kind: 'text',
        arg: 'SIDE',
        help: 'BICC conditions conditioned-policy|conditioned-old',
        needs: 'bicc',
      },
      {
        flag: 'bicc-sides',
        sets: 'biccSides',
        kind: 'text',
        arg: 'ROWS',
        help: 'rows BICC conditions: both|positives|negatives',
        needs: 'bicc',
      },
      {
        flag: 'model',
        sets: 'modelDir',
        kind: 'text',
        arg: 'DIR',
        help: 'start from a Hugging Face model directory (default: a new model);',
        more: ['--output then ends with OUTPUT/model, a directory transformers loads'],
      },
      {
        flag: 'allow-non-finite-weights',
        sets: 'allowNonFiniteWeights',
        kind: 'switch',
        help: 'load weights holding NaN/Inf (off unless given: refused, exit 3)',
      },
      {
        flag: 'digits',
        sets: 'digits',
        kind: 'digits',
        arg: 'N|A,B',
        help: 'digits per operand of arithmetic tasks; A,B: first and second',
      },
      {
        flag: 'backend',
        sets: 'backend',
        kind: 'text',
        arg: 'NAME',
        help: `where tensors live, ${BACKEND_NAMES.join('|')} (default ${TRAIN_DEFAULTS.backend}; rlvr info)`,
      },
    ],
  },
  {
    title: 'LoRA (adapters on a frozen base, as peft; any of these turns it on, the rest take these defaults):',
    intro: [
      "a new model's warm-start trains every weight, then RL trains adapters on that base (the KL reference: the base,",
      'adapters off); with --model every phase trains adapters. Without --learning-rate, RL under LoRA runs at',
      `${LORA_LEARNING_RATE} (docs/results/lora/README.md: the rate the study on the main job picked).`,
    ],
    flags: [
      { flag: 'lora-r', sets: 'lora.r', kind: 'number', help: 'adapter rank' },
      {
        flag: 'lora-alpha',
        sets: 'lora.alpha',
        kind: 'number',
        arg: 'X',
        help: 'scaling numerator: scaling = alpha / r',
      },
      {
        flag: 'lora-dropout',
        sets: 'lora.dropout',
        kind: 'number',
        arg: 'X',
        help: "dropout on the adapters' input while training",
      },
      {
        flag: 'lora-target-modules',
        sets: 'lora.targetModules',
        kind: 'text',
        arg: 'LIST',
        help: "all-linear (the default) or some of these (peft's default: q_proj,v_proj):",
        more: [LORA_MODULES.join(',')],
      },
      {
        flag: 'use-rslora',
        sets: 'lora.useRslora',
        kind: 'switch',
        help: 'scaling = alpha / sqrt(r) (rsLoRA; off unless given)',
      },
      {
        flag: 'adapter',
        sets: 'adapter',
        kind: 'text',
        arg: 'DIR',
        help: 'continue a saved adapter (peft layout) on its --model base (default: new adapters)',
      },
      {
        flag: 'merge-lora',
        sets: 'mergeLora',
        kind: 'switch',
        help: 'also write OUTPUT/model with the adapters merged (off unless given)',
      },
      {
        flag: 'gradient-checkpointing',
        sets: 'gradientCheckpointing',
        kind: 'switch',
        help: 'recompute each layer in the backward, keeping its input only (off unless given)',
      },
    ],
  },
  {
    title: 'where it goes:',
    flags: [
      {
        flag: 'output',
        sets: 'outputDir',
        kind: 'text',
        arg: 'DIR',
        help: 'metrics.jsonl, checkpoints, OUTPUT/model (default: none, nothing saved)',
      },
      {
        flag: 'resume',
        sets: 'resume',
        kind: 'text',
        arg: 'DIR',
        help: 'continue from a checkpoint, e.g. OUTPUT/checkpoint (default: a new run)',
      },
      {
        flag: 'overwrite',
        sets: 'overwrite',
        kind: 'switch',
        help: 'replace a previous run in --output (off unless given: refused unless resuming',
        more: ["it; never deletes the run's inputs, a link's target, or files a run does not write)"],
      },
      { flag: 'save-dtype', sets: 'saveDtype', kind: 'text', arg: 'f32|bf16', help: 'dtype of OUTPUT/model' },
      {
        flag: 'on-non-finite',
        sets: 'onNonFinite',
        kind: 'text',
        arg: 'stop|skip',
        help: 'a NaN/Inf loss or gradient norm ends the run or skips the update',
        more: ['(skip keeps the state before each step: AdamW then copies the weights and moments, not in place)'],
      },
    ],
  },
  {
    title: 'sizes and schedule:',
    flags: [
      { flag: 'seed', sets: 'seed', kind: 'number', help: 'random seed' },
      {
        flag: 'threads',
        sets: 'threads',
        kind: 'number',
        help: "cpu backend threads (default: RLVR_THREADS, else the machine's cores)",
      },
      { flag: 'steps', sets: 'steps', kind: 'number', help: 'RL steps' },
      { flag: 'prompts-per-step', sets: 'promptsPerStep', kind: 'number', help: 'prompts per RL step' },
      { flag: 'num-generations', sets: 'numGenerations', kind: 'number', help: 'G, completions per prompt' },
      { flag: 'temperature', sets: 'temperature', kind: 'number', help: 'sampling temperature' },
      { flag: 'top-p', sets: 'topP', kind: 'number', help: 'nucleus sampling mass' },
      {
        flag: 'max-completion-length',
        sets: 'maxCompletionLength',
        kind: 'number',
        help: 'most tokens per completion',
      },
      { flag: 'learning-rate', sets: 'learningRate', kind: 'number', help: 'RL peak learning rate' },
      { flag: 'num-iterations', sets: 'numIterations', kind: 'number', help: 'epochs over each batch of rollouts' },
      {
        flag: 'groups-per-minibatch',
        sets: 'groupsPerMinibatch',
        kind: 'number',
        help: "groups per minibatch (default: all of a step's)",
      },
      { flag: 'warmup-steps', sets: 'warmupSteps', kind: 'number', help: 'RL learning-rate warmup updates' },
      { flag: 'max-grad-norm', sets: 'maxGradNorm', kind: 'number', help: 'gradient clipping norm' },
      { flag: 'weight-decay', sets: 'weightDecay', kind: 'number', help: 'AdamW weight decay' },
      {
        flag: 'warm-start-steps',
        sets: 'warmStartSteps',
        kind: 'number',
        help: 'supervised warm-start steps',
        note: '0 with --model',
      },
      {
        flag: 'warm-start-until',
        sets: 'warmStartUntil',
        kind: 'number-or-none',
        help: 'end the warm-start once greedy pass@1 on 200 training-split problems (checked every 2 steps) reaches this',
        note: 'none: run every warm-start step',
      },
      {
        flag: 'warm-start-batch-size',
        sets: 'warmStartBatchSize',
        kind: 'number',
        help: 'worked solutions per warm-start step',
      },
      {
        flag: 'warm-start-learning-rate',
        sets: 'warmStartLearningRate',
        kind: 'number',
        help: 'warm-start peak learning rate',
      },
      {
        flag: 'warm-start-context-share',
        sets: 'warmStartContextShare',
        kind: 'number',
        help: "share of warm-start examples with BICC's context before the query",
      },
      {
        flag: 'eval-every',
        sets: 'evalEvery',
        kind: 'number',
        help: 'evaluate every N RL steps',
        note: '0: only before and after RL',
      },
      { flag: 'eval-prompts', sets: 'evalPrompts', kind: 'number', help: 'held-out prompts per evaluation' },
      { flag: 'eval-k', sets: 'evalK', kind: 'number', help: 'k of avg@k and pass@k' },
      {
        flag: 'checkpoint-every',
        sets: 'checkpointEvery',
        kind: 'number',
        help: 'save a checkpoint every N steps',
        note: 'at the end only',
      },
      {
        flag: 'bicc-context-share',
        sets: 'biccContextShare',
        kind: 'number',
        help: "share of the context for BICC's inserted traces",
        needs: 'bicc',
      },
      { flag: 'd-model', sets: 'model.dModel', kind: 'number', help: 'model width of a new model' },
      { flag: 'n-layers', sets: 'model.nLayers', kind: 'number', help: 'transformer layers of a new model' },
      { flag: 'n-heads', sets: 'model.nHeads', kind: 'number', help: 'attention heads of a new model' },
      {
        flag: 'n-kv-heads',
        sets: 'model.nKvHeads',
        kind: 'number',
        help: 'key/value heads (grouped-query) of a new model',
      },
      {
        flag: 'memory-limit-gb',
        sets: 'memoryLimitGb',
        kind: 'number',
        help: "refuse runs estimated above this (default: the host's memory; capped there",
        more: ['unless --allow-over-host-memory)'],
      },
      {
        flag: 'allow-over-host-memory',
        sets: 'allowOverHostMemory',
        kind: 'switch',
        help: "let --memory-limit-gb exceed the host's memory (off unless given)",
        needs: 'memory-limit-gb',
      },
    ],
  },
  {
    title: "objective options (default: the objective's own):",
    flags: [
      {
        flag: 'epsilon',
        sets: 'objectiveOptions.epsilon',
        kind: 'number',
        arg: 'X',
        help: 'lower clip of the ratio, 1 - epsilon (TRL epsilon)',
      },
      {
        flag: 'epsilon-high',
        sets: 'objectiveOptions.epsilonHigh',
        kind: 'number',
        arg: 'X',
        help: "upper clip, 1 + epsilon_high (DAPO's clip-higher)",
      },
      {
        flag: 'beta',
        sets: 'objectiveOptions.beta',
        kind: 'number',
        arg: 'X',
        help: 'KL coefficient to the reference, the starting model',
      },
      {
        flag: 'tau',
        sets: 'objectiveOptions.tau',
        kind: 'number',
        arg: 'X',
        help: "temperature of DisCO's and ConSPO's score contrast",
      },
      { flag: 'margin', sets: 'objectiveOptions.margin', kind: 'number', arg: 'X', help: "ConSPO's target margin M" },
      {
        flag: 'alpha',
        sets: 'objectiveOptions.alpha',
        kind: 'number',
        arg: 'X',
        help: "ConSPO's margin warm-up, as a share of training",
      },
      {
        flag: 'loss-type',
        sets: 'objectiveOptions.lossType',
        kind: 'text',
        arg: 'NAME',
        help: 'aggregation grpo|dapo|dr_grpo|bnpo (TRL loss_type)',
      },
      {
        flag: 'scale-rewards',
        sets: 'objectiveOptions.scaleRewards',
        kind: 'text',
        arg: 'MODE',
        help: 'advantage scaling group|batch|none (TRL scale_rewards)',
      },
    ],
  },
];

/** Every flag `rlvr train` takes, in the help's order. */
export const TRAIN_FLAG_TABLE: readonly TrainFlag[] = TRAIN_FLAG_SECTIONS.flatMap((s) => s.flags);
/** Every flag's name without its dashes (each has one line in TRAIN_USAGE). */
export const TRAIN_FLAGS: readonly string[] = TRAIN_FLAG_TABLE.map((f) => f.flag);
export const TRAIN_FLAG_BY_NAME: ReadonlyMap<string, TrainFlag> = new Map(TRAIN_FLAG_TABLE.map((f) => [f.flag, f]));

/** The flag that sets `target` (`--epsilon-high` for `objectiveOptions.epsilonHigh`), if one does. */
export const flagFor = (target: FlagTarget): string | undefined => {
  const found = TRAIN_FLAG_TABLE.find((f) => f.sets === target);
  return found && `--${found.flag}`;
};
