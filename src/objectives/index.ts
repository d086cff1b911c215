/** RLVR policy objectives: GRPO family, GSPO, GMPO, CISPO, SAPO, DisCO, ConSPO and the discriminative view of GRPO. */
export type { Metrics, ObjectiveResult, TrainingProgress, ObjectiveFn, ConfigInput } from './types.js';
export { ConfigError, BatchError } from './errors.js';
export { checkBatch, LOG_RATIO_BOUND, parseBatch, validateBatch, type RolloutBatch } from './batch.js';
export { groupLayout, groupStats, groupMean, type GroupLayout, type GroupStats } from './groups.js';
export {
  groupAdvantages,
  baselineAdvantages,
  stdOf,
  PAPER_ADVANTAGES,
  TRL_ADVANTAGES,
  VERL_ADVANTAGES,
  PAPER_ADVANTAGE_CONFIG,
  type AdvantageOptions,
  type AdvantageConfig,
  type ScaleRewards,
  type StdMode,
} from './advantages.js';
export {
  aggregate,
  maskedMean,
  parseLossType,
  LOSS_TYPE_ALIASES,
  type LossType,
  type AggregateOptions,
} from './aggregate.js';
export {
  grpoLoss,
  GRPO_DEFAULTS,
  DAPO_DEFAULTS,
  DR_GRPO_DEFAULTS,
  parseGrpoConfig,
  parseDapoConfig,
  parseDrGrpoConfig,
  type GrpoConfig,
} from './grpo.js';
export {
  softOverlongPenalty,
  applySoftOverlong,
  dynamicSamplingKeep,
  selectRolloutRows,
  type OverlongConfig,
} from './dapo.js';
export { gspoLoss, GSPO_DEFAULTS, parseGspoConfig, type GspoConfig } from './gspo.js';
export { gmpoLoss, GMPO_DEFAULTS, parseGmpoConfig, type GmpoConfig } from './gmpo.js';
export { cispoLoss, CISPO_DEFAULTS, parseCispoConfig, type CispoConfig } from './cispo.js';
export { sapoLoss, SAPO_DEFAULTS, parseSapoConfig, type SapoConfig } from './sapo.js';
export { discoLoss, DISCO_DEFAULTS, parseDiscoConfig, type DiscoConfig } from './disco.js';
export { contrastGroups, CONTRAST_DEFAULTS, type ContrastGroups, type ContrastGroupConfig } from './contrast.js';
export {
  conspoLoss,
  CONSPO_DEFAULTS,
  parseConspoConfig,
  type ConspoConfig,
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
export {
  rccBaseline,
  optimalBaseline,
  rccAdvantages,
  sequenceDeltas,
  RCC_ADVANTAGES,
  type RccDeltaMode,
} from './rcc.js';
