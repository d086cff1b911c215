import { MODEL_LIMITS } from '../io/limits.js';
import { TrainConfigError, type TrainConfig } from './config.js';

/**
 * Sizes are checked before anything is allocated, each against a sane limit, so a typo like `--n-layers 1e8`
 * fails at once instead of growing memory until the process is killed; the trainer then checks the whole run
 * against a memory estimate (`training/memory.ts`) and the memory this machine has.
 */
const LIMITS: readonly [keyof TrainConfig | `model.${keyof TrainConfig['model']}`, number][] = [
  // The model's sizes: the same limits as a Hub config.json's (io/limits.ts).
  ['model.dModel', MODEL_LIMITS.dModel],
  ['model.nLayers', MODEL_LIMITS.nLayers],
  ['model.nHeads', MODEL_LIMITS.nHeads],
  ['model.nKvHeads', MODEL_LIMITS.nKvHeads],
  ['model.dFf', MODEL_LIMITS.dFf],
  ['model.maxSeqLen', MODEL_LIMITS.maxSeqLen],
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
    | number
    | null;

/** The first size over its limit (the memory a run needs is estimated by `training/memory.ts`). */
export function checkBounds(cfg: TrainConfig): TrainConfigError | null {
  for (const [key, limit] of LIMITS) {
    const v = valueAt(cfg, key);
    if (v !== null && v > limit) return new TrainConfigError(key, v, `is above the limit of ${limit}`);
  }
  return null;
}
