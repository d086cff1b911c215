import { totalmem } from 'node:os';
import type { TransformerConfig } from '../nn/transformer.js';
import { TrainConfigError, type TrainConfig } from './config.js';

/**
 * Sizes are checked before anything is allocated: each against a sane limit (so a typo like `--n-layers 1e8`
 * fails at once instead of growing memory until the process is killed), then the whole run against a memory
 * estimate and the memory this machine has. The estimate is deliberately rough (f32 everywhere, the largest
 * batch's activations kept for the backward pass) and is printed in the message so the user can judge it.
 */
const LIMITS: readonly [keyof TrainConfig | `model.${keyof TrainConfig['model']}`, number][] = [
  ['model.dModel', 16_384],
  ['model.nLayers', 512],
  ['model.nHeads', 1_024],
  ['model.nKvHeads', 1_024],
  ['model.dFf', 65_536],
  ['model.maxSeqLen', 32_768],
  ['steps', 1e9],
  ['warmStartSteps', 1e9],
  ['warmStartBatchSize', 1e6],
  ['promptsPerStep', 1e5],
  ['numGenerations', 1e4],
  ['maxCompletionLength', 32_768],
  ['numIterations', 1e4],
  ['evalPrompts', 1e6],
  ['evalK', 1e4],
];

const valueAt = (cfg: TrainConfig, key: string): number | null =>
  (key.startsWith('model.') ? cfg.model[key.slice(6) as keyof TrainConfig['model']] : cfg[key as keyof TrainConfig]) as
    number | null;

const GiB = 2 ** 30;
const fmt = (bytes: number): string =>
  bytes >= GiB ? `${(bytes / GiB).toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(1)} MiB`;

export interface MemoryEstimate {
  readonly parameters: number;
  /** Parameters, gradients, two AdamW moments and the reference policy. */
  readonly stateBytes: number;
  /** Activations of the largest batch kept for its backward pass. */
  readonly activationBytes: number;
  readonly totalBytes: number;
}

export function estimateMemory(cfg: TrainConfig, vocabSize: number): MemoryEstimate {
  const m = cfg.model;
  const d = m.dModel;
  const kvDim = (d / m.nHeads) * m.nKvHeads;
  const perLayer = 2 * d * d + 2 * d * kvDim + 3 * d * m.dFf + 2 * d;
  const parameters = vocabSize * d + m.nLayers * perLayer + d;
  const t = m.maxSeqLen;
  const perSequence = t * (m.nLayers * (12 * d + 3 * m.dFf + 2 * m.nHeads * t) + 2 * vocabSize);
  const rows = Math.max(
    cfg.warmStartBatchSize,
    (cfg.groupsPerMinibatch ?? cfg.promptsPerStep) * cfg.numGenerations,
    cfg.evalPrompts,
  );
  const stateBytes = 4 * 5 * parameters;
  const activationBytes = 4 * rows * perSequence;
  return { parameters, stateBytes, activationBytes, totalBytes: stateBytes + activationBytes };
}

/** The first size over its limit, or a run whose estimate exceeds `memoryBytes` (default: this machine's). */
export function checkBounds(
  cfg: TrainConfig,
  model: Pick<TransformerConfig, 'vocabSize'>,
  memoryBytes = totalmem(),
): TrainConfigError | null {
  for (const [key, limit] of LIMITS) {
    const v = valueAt(cfg, key);
    if (v !== null && v > limit) return new TrainConfigError(key, v, `is above the limit of ${limit}`);
  }
  const e = estimateMemory(cfg, model.vocabSize);
  if (e.totalBytes > memoryBytes) {
    const detail = `${e.parameters.toLocaleString('en')} parameters: ${fmt(e.stateBytes)} of weights, gradients and moments, ${fmt(e.activationBytes)} of activations`;
    return new TrainConfigError(
      'model',
      cfg.model,
      `needs about ${fmt(e.totalBytes)} (${detail}), more than the ${fmt(memoryBytes)} of this machine`,
    );
  }
  return null;
}
