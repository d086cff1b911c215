import * as E from 'fp-ts/lib/Either.js';
import { RlvrError } from '../core/errors.js';
import { isObjectiveName, type ObjectiveName } from '../objectives/registry.js';
import type { ConfigInput } from '../objectives/config.js';
import type { TransformerConfig } from '../nn/transformer.js';

/**
 * The trainer's configuration: one typed record with defaults sized for a 2-core CPU (the README's main command
 * finishes in minutes), validated at the boundary. Objective options (epsilon, beta, tau, ...) are passed through
 * to the objective's own parser, which validates them and names the bad field.
 */
export type TaskName = 'addition' | 'multiplication' | 'countdown';
export const TASK_NAMES: readonly TaskName[] = ['addition', 'multiplication', 'countdown'];

/** The model's size settings (the rest of its config follows from the task's vocabulary). */
export type ModelSize = Pick<TransformerConfig, 'dModel' | 'nLayers' | 'nHeads' | 'nKvHeads' | 'dFf' | 'maxSeqLen'>;

export interface TrainConfig {
  readonly task: TaskName;
  /** Digits per operand for arithmetic tasks (null: the task's default). */
  readonly digits: number | null;
  readonly objective: ObjectiveName;
  /** Passed to the objective's config parser (TRL names accepted: epsilon, epsilon_high, beta, loss_type, ...). */
  readonly objectiveOptions: ConfigInput;
  /** `group`: the objective's own group-normalised advantages; `rcc`: the RCC baseline (issue 6). */
  readonly advantage: 'group' | 'rcc';
  readonly rccDelta: 'sum' | 'mean';
  /** Score rollouts under bilateral context conditioning (training only). */
  readonly bicc: boolean;
  readonly biccContextShare: number;
  readonly backend: 'cpu' | 'webgpu';
  readonly seed: number;
  readonly model: ModelSize;
  readonly warmStartSteps: number;
  readonly warmStartBatchSize: number;
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
  /** A Hugging Face model directory (config.json, safetensors, tokenizer.json) to start from (null: a new model). */
  readonly modelDir: string | null;
  /** A JSON-lines file of { prompt, answer } rows, verified by the \boxed{} verifier, instead of `task`. */
  readonly dataset: string | null;
  /** Dtype of the Hub directory written at the end of a `modelDir` run. */
  readonly saveDtype: 'f32' | 'bf16';
  /** Refuse runs whose memory estimate exceeds this many GiB (null: the host's memory). */
  readonly memoryLimitGb: number | null;
}

export const TRAIN_DEFAULTS: TrainConfig = {
  task: 'addition',
  digits: null,
  objective: 'conspo',
  objectiveOptions: {},
  advantage: 'group',
  rccDelta: 'sum',
  bicc: false,
  biccContextShare: 0.4,
  backend: 'cpu',
  seed: 0,
  model: { dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 4, dFf: 192, maxSeqLen: 48 },
  warmStartSteps: 450,
  warmStartBatchSize: 64,
  warmStartLearningRate: 3e-3,
  steps: 120,
  promptsPerStep: 16,
  numGenerations: 8,
  temperature: 1,
  topP: 1,
  maxCompletionLength: 8,
  learningRate: 1e-4,
  numIterations: 1,
  groupsPerMinibatch: null,
  warmupSteps: 5,
  maxGradNorm: 1,
  weightDecay: 0,
  evalEvery: 0,
  evalPrompts: 200,
  evalK: 4,
  outputDir: null,
  checkpointEvery: 0,
  resume: null,
  modelDir: null,
  dataset: null,
  saveDtype: 'f32',
  memoryLimitGb: null,
};

/** A bad training setting: the field, the value and why. */
export class TrainConfigError extends RlvrError {
  constructor(
    readonly field: string,
    readonly value: unknown,
    reason: string,
  ) {
    super(`train config: ${field} = ${JSON.stringify(value)} ${reason}`);
  }
}

type Check = (cfg: TrainConfig) => TrainConfigError | null;
const need = (field: string, ok: (cfg: TrainConfig) => boolean, value: (cfg: TrainConfig) => unknown, reason: string): Check => (cfg) =>
  ok(cfg) ? null : new TrainConfigError(field, value(cfg), reason);
const posInt = (field: keyof TrainConfig): Check =>
  need(field, (c) => Number.isInteger(c[field]) && (c[field] as number) >= 1, (c) => c[field], 'must be an integer >= 1');
const nonNegInt = (field: keyof TrainConfig): Check =>
  need(field, (c) => Number.isInteger(c[field]) && (c[field] as number) >= 0, (c) => c[field], 'must be an integer >= 0');
const positive = (field: keyof TrainConfig): Check =>
  need(field, (c) => Number.isFinite(c[field]) && (c[field] as number) > 0, (c) => c[field], 'must be a finite number > 0');

const CHECKS: readonly Check[] = [
  need('task', (c) => TASK_NAMES.includes(c.task), (c) => c.task, `must be one of ${TASK_NAMES.join(', ')}`),
  need('digits', (c) => c.digits === null || (Number.isInteger(c.digits) && c.digits >= 1 && c.digits <= 7), (c) => c.digits, 'must be an integer in 1..7'),
  need('objective', (c) => isObjectiveName(c.objective), (c) => c.objective, 'is not a known objective'),
  need('advantage', (c) => c.advantage === 'group' || c.advantage === 'rcc', (c) => c.advantage, "must be 'group' or 'rcc'"),
  need('rccDelta', (c) => c.rccDelta === 'sum' || c.rccDelta === 'mean', (c) => c.rccDelta, "must be 'sum' or 'mean'"),
  need('biccContextShare', (c) => c.biccContextShare > 0 && c.biccContextShare < 1, (c) => c.biccContextShare, 'must be in (0, 1)'),
  need('backend', (c) => c.backend === 'cpu' || c.backend === 'webgpu', (c) => c.backend, "must be 'cpu' or 'webgpu'"),
  need('seed', (c) => Number.isSafeInteger(c.seed), (c) => c.seed, 'must be an integer'),
  ...(['dModel', 'nLayers', 'nHeads', 'nKvHeads', 'dFf', 'maxSeqLen'] as const).map((k) =>
    need(`model.${k}`, (c) => Number.isInteger(c.model[k]) && c.model[k] >= 1, (c) => c.model[k], 'must be an integer >= 1'),
  ),
  nonNegInt('warmStartSteps'),
  posInt('warmStartBatchSize'),
  positive('warmStartLearningRate'),
  nonNegInt('steps'),
  posInt('promptsPerStep'),
  need('numGenerations', (c) => Number.isInteger(c.numGenerations) && c.numGenerations >= 2, (c) => c.numGenerations, 'must be an integer >= 2 (a group needs two rollouts to compare)'),
  need('temperature', (c) => Number.isFinite(c.temperature) && c.temperature > 0, (c) => c.temperature, 'must be > 0 for RL sampling'),
  need('topP', (c) => c.topP > 0 && c.topP <= 1, (c) => c.topP, 'must be in (0, 1]'),
  posInt('maxCompletionLength'),
  positive('learningRate'),
  posInt('numIterations'),
  need('groupsPerMinibatch', (c) => c.groupsPerMinibatch === null || (Number.isInteger(c.groupsPerMinibatch) && c.groupsPerMinibatch >= 1), (c) => c.groupsPerMinibatch, 'must be an integer >= 1'),
  nonNegInt('warmupSteps'),
  positive('maxGradNorm'),
  need('weightDecay', (c) => Number.isFinite(c.weightDecay) && c.weightDecay >= 0, (c) => c.weightDecay, 'must be >= 0'),
  nonNegInt('evalEvery'),
  posInt('evalPrompts'),
  posInt('evalK'),
  nonNegInt('checkpointEvery'),
  need('saveDtype', (c) => ['f32', 'bf16'].includes(c.saveDtype), (c) => c.saveDtype, "must be 'f32' or 'bf16'"),
  need(
    'memoryLimitGb',
    (c) => c.memoryLimitGb === null || (Number.isFinite(c.memoryLimitGb) && c.memoryLimitGb > 0),
    (c) => c.memoryLimitGb,
    'must be a number > 0',
  ),
];

/** Fill defaults and validate; the first bad field is reported. */
export function parseTrainConfig(input: Partial<TrainConfig> = {}): E.Either<TrainConfigError, TrainConfig> {
  const known = new Set(Object.keys(TRAIN_DEFAULTS));
  const unknown = Object.keys(input).find((k) => !known.has(k));
  if (unknown) return E.left(new TrainConfigError(unknown, (input as Record<string, unknown>)[unknown], 'is not a training option'));
  // A pretrained model needs no supervised warm-start unless one is asked for.
  const warmStart = input.modelDir && input.warmStartSteps === undefined ? { warmStartSteps: 0 } : {};
  const model = { ...TRAIN_DEFAULTS.model, ...input.model };
  const cfg: TrainConfig = { ...TRAIN_DEFAULTS, ...warmStart, ...input, model };
  for (const check of CHECKS) {
    const err = check(cfg);
    if (err) return E.left(err);
  }
  return E.right(cfg);
}
