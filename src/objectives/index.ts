/** RLVR policy objectives: GRPO family, GSPO, GMPO, CISPO, SAPO, DisCO, ConSPO and the discriminative view of GRPO. */
export type { Metrics, ObjectiveResult, TrainingProgress, ObjectiveFn } from './types.js';
export { ConfigError, BatchError } from './errors.js';
export { checkBatch, parseBatch, validateBatch, type RolloutBatch } from './batch.js';
export { groupLayout, groupStats, groupMean, type GroupLayout, type GroupStats } from './groups.js';
export {
  groupAdvantages,
  stdOf,
  PAPER_ADVANTAGES,
  TRL_ADVANTAGES,
  VERL_ADVANTAGES,
  type AdvantageOptions,
  type ScaleRewards,
  type StdMode,
} from './advantages.js';
export { aggregate, maskedMean, parseLossType, LOSS_TYPE_ALIASES, type LossType, type AggregateOptions } from './aggregate.js';
export * from './config.js';
export { grpoLoss } from './grpo.js';
export { softOverlongPenalty, applySoftOverlong, dynamicSamplingKeep, selectRows } from './dapo.js';
export { gspoLoss } from './gspo.js';
export { gmpoLoss } from './gmpo.js';
export { cispoLoss } from './cispo.js';
export { sapoLoss } from './sapo.js';
export { discoLoss } from './disco.js';
export { contrastGroups, type ContrastGroups } from './contrast.js';
export {
  conspoLoss,
  conspoMargin,
  scheduledMargin,
  contrastiveObjective,
  type ContrastiveOptions,
  type ContrastiveResult,
} from './conspo.js';
export {
  clippedScores,
  lemma3Weights,
  binaryWeight,
  binaryFormCoefficients,
  generalFormCoefficients,
  discriminativeFromScores,
  discriminativeLoss,
  type GroupWeights,
  type DiscriminativeCoefficients,
  type DiscriminativeOptions,
} from './discriminative.js';
export {
  OBJECTIVES,
  OBJECTIVE_NAMES,
  isObjectiveName,
  makeObjective,
  type BoundObjective,
  type ObjectiveConfigs,
  type ObjectiveDefinition,
  type ObjectiveName,
} from './registry.js';
export { rccBaseline, optimalBaseline, rccAdvantages, sequenceDeltas, type RccDeltaMode, type RccOptions } from './rcc.js';
