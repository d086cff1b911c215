import * as E from 'fp-ts/lib/Either.js';
import { clipText, FieldError, quoteValue } from '../core/errors.js';
import { OBJECTIVE_NAMES, type ObjectiveName } from '../objectives/registry.js';
import type { ConfigInput } from '../objectives/types.js';
import type { TransformerConfig } from '../nn/transformer.js';
import { BACKEND_NAMES, type BackendName } from '../backends/registry.js';
import { MAX_THREADS } from '../core/backend.js';
import { TASK_NAMES, type Digits, type TaskName } from '../tasks/registry.js';

export { TASK_NAMES, type Digits, type TaskName };
import {
  BICC_DEFAULTS,
  BICC_PLACEMENTS,
  BICC_RATIOS,
  BICC_SIDES,
  type BiccPlacement,
  type BiccRatio,
  type BiccSides,
} from '../rl/bicc-options.js';
import { LORA_DEFAULTS, LORA_MODULES, loraConfigProblem, parseTargetModules, type LoraConfig } from '../nn/lora.js';
import {
  anyRecord,
  bool,
  type Check,
  fail,
  intAtLeast,
  integer,
  nonNegative,
  nonNegativeInt,
  nullable,
  num,
  oneOf,
  openUnit,
  parseWith,
  positive,
  positiveInt,
  type Post,
  record,
  str,
  unitHalfOpen,
  type Spec,
} from '../core/validate.js';

/**
 * The trainer's configuration: one typed record with defaults sized for a 2-core CPU (the README's main command
 * finishes in minutes), validated at the boundary. Objective options (epsilon, beta, tau, ...) are passed through
 * to the objective's own parser, which validates them and names the bad field.
 */

/** The model's size settings (the rest of its config follows from the task's vocabulary). */
export type ModelSize = Pick<TransformerConfig, 'dModel' | 'nLayers' | 'nHeads' | 'nKvHeads' | 'dFf' | 'maxSeqLen'>;

export interface TrainConfig {
  readonly task: TaskName;
  /**
   * Digits per operand for arithmetic tasks (null: the task's default): one number for both operands of addition
   * (for multiplication, the first; the second has 1), or [first, second], e.g. [2, 1] for 37+5.
   */
  readonly digits: Digits | null;
  readonly objective: ObjectiveName;
  /** Passed to the objective's config parser (TRL names accepted: epsilon, epsilon_high, beta, loss_type, ...). */
  readonly objectiveOptions: ConfigInput;
  /** `group`: the objective's own group-normalised advantages; `rcc`: the RCC baseline. */
  readonly advantage: 'group' | 'rcc';
  readonly rccDelta: 'sum' | 'mean';
  /** Score rollouts under bilateral context conditioning (training only). */
  readonly bicc: boolean;
  readonly biccContextShare: number;
  /** Where BICC inserts the opposite-class traces: before the query (default; see `BiccOptions.placement`) or after it. */
  readonly biccPlacement: BiccPlacement;
  /**
   * Which side of the ratio BICC conditions: the policy (the paper's formula, default) or pi_old (what the
   * authors' code sets out to do); see `BiccRatio`.
   */
  readonly biccRatio: BiccRatio;
  /** Which rows BICC conditions: both classes (default), or one, the unilateral ablations; see `BiccOptions.sides`. */
  readonly biccSides: BiccSides;
  /** Where the run's tensors live, by registry name; `train` opens it unless given a backend. */
  readonly backend: BackendName;
  /** The CPU backend's threads, 1..MAX_THREADS (null: RLVR_THREADS, else the machine's cores); results do not depend on it. */
  readonly threads: number | null;
  readonly seed: number;
  readonly model: ModelSize;
  readonly warmStartSteps: number;
  /**
   * End the warm-start early, at the first check (every WARM_START_CHECK_EVERY steps) where greedy pass@1 on a
   * fixed validation set of training-split problems reaches this (null: run all warmStartSteps). Lets every seed
   * start RL from a policy that is weak but not zero, however fast its warm-start learns.
   */
  readonly warmStartUntil: number | null;
  readonly warmStartBatchSize: number;
  /**
   * Share of the warm-start's examples that get BICC-style context (opposite-class traces of a simulated group, in
   * BICC's layout) before the query, so that the policy learns to solve the query whatever precedes it (0: none).
   */
  readonly warmStartContextShare: number;
  readonly warmStartLearningRate: number;
  /** RL steps (each: sample, score, num_iterations epochs of updates). */
  readonly steps: number;
  readonly promptsPerStep: number;
  /** G, completions per prompt (TRL's num_generations). */
  readonly numGenerations: number;
  readonly temperature: number;
  readonly topP: number;
  readonly maxCompletionLength: number;
  readonly learningRate: number;
  /** Optimisation epochs over each batch of rollouts (TRL's num_iterations). */
  readonly numIterations: number;
  /** Groups per minibatch (whole groups stay together; default: all of a step's groups in one minibatch). */
  readonly groupsPerMinibatch: number | null;
  readonly warmupSteps: number;
  readonly maxGradNorm: number;
  readonly weightDecay: number;
  /** Evaluate every N RL steps (0: only before and after RL). */
  readonly evalEvery: number;
  readonly evalPrompts: number;
  /** k for avg@k and pass@k. */
  readonly evalK: number;
  /** Where metrics.jsonl and checkpoints go (null: nowhere). */
  readonly outputDir: string | null;
  /** Save a checkpoint every N steps of either phase (0: only at the end, if outputDir is set). */
  readonly checkpointEvery: number;
  /** A checkpoint directory to resume from. */
  readonly resume: string | null;
  /** Replace a non-empty output directory (refused otherwise, unless resuming in place). */
  readonly overwrite: boolean;
  /**
   * A non-finite loss, gradient norm or updated weight: end the run with an error (`stop`) or drop that update
   * (`skip`). `skip` keeps the weights and moments from before each step, so its AdamW steps copy them instead of
   * updating them in place (`donatesUpdates`): 3 x the trained weights' bytes more at the step.
   */
  readonly onNonFinite: 'stop' | 'skip';
  /** A Hugging Face model directory (config.json, safetensors, tokenizer.json) to start from (null: a new model). */
  readonly modelDir: string | null;
  /** A JSON-lines file of { prompt, answer } rows, verified by the \boxed{} verifier, instead of `task`. */
  readonly dataset: string | null;
  /** Dtype of the Hub directory written at the end of a `modelDir` run. */
  readonly saveDtype: 'f32' | 'bf16';
  /**
   * Refuse runs whose memory estimate exceeds this many GiB (null: the host's memory). Above the host's memory it
   * is capped there, unless `allowOverHostMemory`: a run that starts allocating past it swaps or is killed.
   */
  readonly memoryLimitGb: number | null;
  /** Let `memoryLimitGb` exceed the host's memory (a host that swaps, or whose memory the OS misreports). */
  readonly allowOverHostMemory: boolean;
  /** Load weights holding NaN or infinities (a Hub model's or a checkpoint's; refused by default). */
  readonly allowNonFiniteWeights: boolean;
  /**
   * Train LoRA adapters on a frozen base (null: every weight). Given partly, the rest is peft's default (r 8,
   * alpha 8, dropout 0, q_proj and v_proj).
   */
  readonly lora: LoraConfig | null;
  /** A saved adapter (peft's layout) to continue from; its adapter_config.json is the run's LoRA config. */
  readonly adapter: string | null;
  /** With LoRA: also write OUTPUT/model with the adapters merged into the weights. */
  readonly mergeLora: boolean;
  /**
   * Recompute each layer's activations in the backward pass instead of keeping them (Hugging Face's
   * gradient_checkpointing): a training forward holds one layer's input per layer, at the cost of a second forward.
   */
  readonly gradientCheckpointing: boolean;
}

/**
 * The defaults are the main job's regime (`npm run example:addition`, `rlvr train` with no flags, the browser page's
 * default preset): 2+1-digit addition, a supervised warm-start until the policy is weak but not at zero, then 300
 * GRPO steps at learning rate 5e-4 and temperature 0.7. docs/results/addition-regime/README.md has the search that
 * chose them and how they do over seeds.
 */
export const TRAIN_DEFAULTS: TrainConfig = {
  task: 'addition',
  digits: [2, 1],
  objective: 'grpo',
  objectiveOptions: {},
  advantage: 'group',
  rccDelta: 'sum',
  bicc: false,
  // BICC's own defaults (`BICC_DEFAULTS`), so that the trainer and `conditionBatch` cannot drift apart.
  biccContextShare: BICC_DEFAULTS.contextShare,
  biccPlacement: BICC_DEFAULTS.placement,
  biccRatio: 'conditioned-policy',
  biccSides: BICC_DEFAULTS.sides,
  backend: 'cpu',
  threads: null,
  seed: 0,
  model: { dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 4, dFf: 192, maxSeqLen: 48 },
  // Supervised warm-start until greedy pass@1 on 200 training-split problems reaches 0.4 (checked every 2 steps),
  // at most 600 steps: each seed starts RL weak but not at zero, wherever its warm-start's jump happens.
  warmStartSteps: 600,
  warmStartUntil: 0.4,
  warmStartBatchSize: 64,
  warmStartContextShare: 0,
  warmStartLearningRate: 3e-3,
  steps: 300,
  promptsPerStep: 16,
  numGenerations: 8,
  temperature: 0.7,
  topP: 1,
  maxCompletionLength: 8,
  learningRate: 5e-4,
  numIterations: 1,
  groupsPerMinibatch: null,
  warmupSteps: 20,
  maxGradNorm: 1,
  weightDecay: 0,
  evalEvery: 50,
  evalPrompts: 200,
  evalK: 4,
  outputDir: null,
  checkpointEvery: 0,
  resume: null,
  overwrite: false,
  onNonFinite: 'stop',
  modelDir: null,
  dataset: null,
  saveDtype: 'f32',
  memoryLimitGb: null,
  allowOverHostMemory: false,
  allowNonFiniteWeights: false,
  lora: null,
  adapter: null,
  mergeLora: false,
  gradientCheckpointing: false,
};

/**
 * LoRA's defaults where this library's differ from peft's (`LORA_DEFAULTS`: r 8, alpha 8, q_proj and v_proj, which
 * stay available by name): every linear layer and alpha 32 (scaling 32 / r), as "LoRA Without Regret" (Thinking
 * Machines, 2025) ran policy-gradient RL; and when LoRA is on and no learning rate is given, RL's learning rate is
 * `LORA_LEARNING_RATE`, the one the study on the main job picked (docs/results/lora/README.md).
 */
export const LORA_TRAIN_DEFAULTS: LoraConfig = { ...LORA_DEFAULTS, alpha: 32, targetModules: [...LORA_MODULES] };
export const LORA_LEARNING_RATE = 2e-3;

/** A bad training setting: the field (a config key, or the flag that gave it), the value (null: none) and why. */
export class TrainConfigError extends FieldError {
  constructor(field: string, value: unknown, reason: string) {
    super(
      field,
      value,
      reason,
      `train config: ${clipText(field)}${value === null ? '' : ` = ${quoteValue(value)}`} ${reason}`,
    );
  }
}

/**
 * The smallest sampling temperature. Sampling and scoring divide the logits by it in f32, which overflows past
 * 3.4e38: at 1e-300 even 1/T is infinite and every log-prob NaN, which the run then reported as divergence. At 1e-4
 * a logit would have to exceed 3.4e34 to overflow, far beyond any model's; and below it sampling is greedy already
 * (a logit gap of 0.01 makes odds of e^100), so a smaller value would change nothing but that risk.
 */
export const MIN_TEMPERATURE = 1e-4;

const MODEL_DEFAULTS = TRAIN_DEFAULTS.model;
const oneDigitCount = (x: unknown): boolean => typeof x === 'number' && Number.isInteger(x) && x >= 1 && x <= 7;
/** Operand digits: one count for both operands, or a pair [first, second] (a checkpoint's identity reads it too). */
export const digitsCheck: Check<Digits> = (v) =>
  oneDigitCount(v)
    ? E.right(v as number)
    : Array.isArray(v) && v.length === 2 && v.every(oneDigitCount)
      ? E.right([v[0], v[1]] as const)
      : fail('must be an integer in 1..7 or a pair of them ([first, second])');
const modelSpec: Spec<ModelSize> = {
  dModel: positiveInt,
  nLayers: positiveInt,
  nHeads: positiveInt,
  nKvHeads: positiveInt,
  dFf: positiveInt,
  maxSeqLen: positiveInt,
};

const targetModules: Check<LoraConfig['targetModules']> = (v) => {
  const parsed = parseTargetModules(v);
  return E.isRight(parsed) ? parsed : fail(parsed.left);
};
const loraSpec: Spec<LoraConfig> = {
  r: positiveInt,
  alpha: positive,
  dropout: num((x) => x >= 0 && x < 1, 'must be in [0, 1)'),
  targetModules,
  useRslora: bool,
};
// peft's names for the same settings.
const LORA_ALIASES = {
  lora_alpha: 'alpha',
  lora_dropout: 'dropout',
  loraAlpha: 'alpha',
  loraDropout: 'dropout',
} as const;

const SPEC: Spec<TrainConfig> = {
  task: oneOf(TASK_NAMES),
  digits: nullable(digitsCheck),
  objective: oneOf(OBJECTIVE_NAMES),
  objectiveOptions: anyRecord,
  advantage: oneOf(['group', 'rcc']),
  rccDelta: oneOf(['sum', 'mean']),
  bicc: bool,
  biccContextShare: openUnit,
  biccPlacement: oneOf(BICC_PLACEMENTS),
  biccRatio: oneOf(BICC_RATIOS),
  biccSides: oneOf(BICC_SIDES),
  backend: oneOf(BACKEND_NAMES),
  threads: nullable(
    num((x) => Number.isInteger(x) && x >= 1 && x <= MAX_THREADS, `must be an integer in 1..${MAX_THREADS}`),
  ),
  seed: integer,
  model: record(modelSpec, {}, MODEL_DEFAULTS),
  warmStartSteps: nonNegativeInt,
  warmStartUntil: nullable(unitHalfOpen),
  warmStartBatchSize: positiveInt,
  warmStartContextShare: num((x) => x >= 0 && x <= 1, 'must be in [0, 1]'),
  warmStartLearningRate: positive,
  steps: nonNegativeInt,
  promptsPerStep: positiveInt,
  numGenerations: intAtLeast(2, ' (a group needs two rollouts to compare)'),
  temperature: num(
    (x) => x >= MIN_TEMPERATURE,
    `must be >= ${MIN_TEMPERATURE} (the logits are divided by it in f32; smaller is greedy already)`,
  ),
  topP: unitHalfOpen,
  maxCompletionLength: positiveInt,
  learningRate: positive,
  numIterations: positiveInt,
  groupsPerMinibatch: nullable(positiveInt),
  warmupSteps: nonNegativeInt,
  maxGradNorm: positive,
  weightDecay: nonNegative,
  evalEvery: nonNegativeInt,
  evalPrompts: positiveInt,
  evalK: positiveInt,
  outputDir: nullable(str),
  checkpointEvery: nonNegativeInt,
  resume: nullable(str),
  overwrite: bool,
  onNonFinite: oneOf(['stop', 'skip']),
  modelDir: nullable(str),
  dataset: nullable(str),
  saveDtype: oneOf(['f32', 'bf16']),
  memoryLimitGb: nullable(positive),
  allowOverHostMemory: bool,
  allowNonFiniteWeights: bool,
  lora: nullable(record(loraSpec, LORA_ALIASES, LORA_TRAIN_DEFAULTS)),
  adapter: nullable(str),
  mergeLora: bool,
  gradientCheckpointing: bool,
};

// A pretrained model needs no supervised warm-start unless one is asked for.
const pretrainedWarmStart: Post<TrainConfig> = (c, given) =>
  E.right(c.modelDir !== null && !given.has('warmStartSteps') ? { ...c, warmStartSteps: 0 } : c);

// An adapter directory brings its own LoRA config; merging needs adapters.
const loraRules: Post<TrainConfig> = (c) => {
  if (c.adapter !== null && c.lora !== null)
    return E.left({
      path: ['lora'],
      reason: 'is given with adapter (--adapter), whose adapter_config.json says how it was made',
    });
  // An adapter continues on the base it was trained on: a Hub model's; a resumed checkpoint holds its own adapters.
  if (c.adapter !== null && c.modelDir === null)
    return E.left({ path: ['adapter'], reason: 'needs modelDir (--model), the base the adapter was trained on' });
  if (c.adapter !== null && c.resume !== null)
    return E.left({
      path: ['adapter'],
      reason: 'is given with resume (--resume), whose checkpoint holds the adapters it continues',
    });
  if (c.mergeLora && c.adapter === null && c.lora === null)
    return E.left({ path: ['mergeLora'], reason: 'needs LoRA adapters: lora (--lora-r) or adapter (--adapter)' });
  if (c.mergeLora && c.modelDir === null)
    return E.left({ path: ['mergeLora'], reason: 'writes OUTPUT/model, a Hub model: it needs modelDir (--model)' });
  if (c.mergeLora && c.outputDir === null)
    return E.left({ path: ['mergeLora'], reason: 'writes OUTPUT/model: it needs outputDir (--output)' });
  // The dtype of OUTPUT/model, which only a --model run writes (under LoRA, only with --merge-lora).
  if (c.saveDtype !== 'f32') {
    const lora = c.lora !== null || c.adapter !== null;
    const why =
      c.modelDir === null
        ? 'applies to OUTPUT/model, which only a run from modelDir (--model) writes'
        : c.outputDir === null
          ? 'applies to OUTPUT/model: it needs outputDir (--output)'
          : lora && !c.mergeLora
            ? 'applies to OUTPUT/model, which a LoRA run writes only with mergeLora (--merge-lora)'
            : null;
    if (why) return E.left({ path: ['saveDtype'], reason: why });
  }
  const problem = c.lora ? loraConfigProblem(c.lora) : null;
  if (problem) return E.left({ path: ['lora', problem.field], reason: problem.why });
  return E.right(c);
};

// Adapters learn at their own rate: LoRA's default learning rate unless one is given.
const loraLearningRate: Post<TrainConfig> = (c, given) =>
  E.right(
    (c.lora !== null || c.adapter !== null) && !given.has('learningRate')
      ? { ...c, learningRate: LORA_LEARNING_RATE }
      : c,
  );

const toError = (field: string, value: unknown, reason: string): TrainConfigError =>
  new TrainConfigError(field, value, reason);

/** Fill defaults and validate (camelCase or snake_case keys, unknown keys rejected); names the first bad field. */
export function parseTrainConfig(input: Partial<TrainConfig> = {}): E.Either<TrainConfigError, TrainConfig> {
  return parseWith(toError, SPEC, {}, TRAIN_DEFAULTS, input, (c, given) =>
    E.chain((d: TrainConfig) => loraLearningRate(d, given))(
      E.chain((d: TrainConfig) => loraRules(d, given))(pretrainedWarmStart(c, given)),
    ),
  );
}
