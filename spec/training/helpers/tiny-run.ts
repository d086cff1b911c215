import * as E from 'fp-ts/lib/Either.js';
import { parseTrainConfig, type TrainConfig } from '../../../src/training/config.js';

/**
 * A tiny trainer run: small enough for CI, big enough to exercise every phase (warm-start, RL, evaluation). It
 * states the task, objective and schedule these specs were written against (the library's defaults until they became
 * the main job's regime), so a change of defaults does not change what they run.
 */
export const TINY_RUN: Partial<TrainConfig> = {
  digits: 2,
  objective: 'conspo',
  warmStartUntil: null,
  temperature: 1,
  learningRate: 1e-4,
  warmupSteps: 5,
  evalEvery: 0,
  model: { dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, dFf: 32, maxSeqLen: 24 },
  warmStartSteps: 3,
  warmStartBatchSize: 8,
  steps: 3,
  promptsPerStep: 2,
  numGenerations: 4,
  maxCompletionLength: 6,
  evalPrompts: 4,
  evalK: 2,
  seed: 3,
};

/** The tiny run with some settings changed, parsed as a user's config is (a bad override throws). */
export function tinyRun(over: Partial<TrainConfig> = {}): TrainConfig {
  const c = parseTrainConfig({ ...TINY_RUN, ...over });
  if (E.isLeft(c)) throw c.left;
  return c.right;
}
