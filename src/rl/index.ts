/** Rollouts with a KV cache, per-token log-prob scoring (the training forward) and the supervised warm-start loss. */
export {
  type SequenceBatch,
  seqLen,
  encodePrompt,
  encodeCompletion,
  packSequences,
  selectRows,
  selectRowValues,
  positionsAndBias,
} from './batch.js';
export {
  scoreLogProbs,
  completionLogits,
  scaleLogits,
  batchTensors,
  isBatchTensors,
  type BatchTensors,
  type ScoreOptions,
} from './score.js';
export { scoreRollouts, type RolloutScores, type ScoringPolicies } from './rollout-scores.js';
export { sampleRollouts, type SamplerOptions, type Rollouts } from './sampler.js';
export { sftLoss, sftBatch, sftExamples, type SftExample } from './sft.js';
export {
  conditionBatch,
  insertTraces,
  contextLogRatio,
  biccLogProbs,
  biccInput,
  parseBiccOptions,
  BiccError,
  BICC_DEFAULTS,
  BICC_PLACEMENTS,
  BICC_RATIOS,
  BICC_SIDES,
  type BiccRatio,
  type BiccSides,
  type ContextLogRatio,
  type InsertedContext,
  type BiccOptions,
  type BiccPlacement,
  type BiccInput,
  type ConditionedBatch,
  type InsertedTrace,
} from './bicc.js';
export { contextWarmStartBatch, nearMiss, type ContextWarmStartOptions } from './bicc-warm-start.js';
