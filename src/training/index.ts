/** The RLVR trainer: config, loop, evaluation and metrics. */
export {
  TRAIN_DEFAULTS,
  LORA_TRAIN_DEFAULTS,
  LORA_LEARNING_RATE,
  TASK_NAMES,
  TrainConfigError,
  parseTrainConfig,
  type TrainConfig,
  type TaskName,
  type ModelSize,
} from './config.js';
export {
  DEFAULT_KEEP_RECORDS,
  heldOutLine,
  train,
  taskFor,
  NO_SIGNAL_WARN_STEPS,
  BICC_CONTEXT_WARN_NATS,
  WARM_START_CHECK_EVERY,
  WARM_START_VALIDATION,
  type TrainOptions,
  type TrainResult,
  type TrainHooks,
  type TrainWarning,
  type RolloutView,
} from './trainer.js';
export {
  describeTraining,
  FULL,
  loraTraining,
  planRun,
  rlLabel,
  type Trains,
  type TrainingPlan,
} from './trains.js';
export { evaluate, type EvalResult, type EvalOptions } from './evaluate.js';
export { MetricsWriter, readMetrics, type MetricRecord } from './metrics.js';
export { updatePolicy, type PolicyBatch, type UpdatePlan, type UpdateResult } from './policy-update.js';
export {
  readPretrained,
  loadPretrainedParams,
  savePretrained,
  loadDatasetTask,
  type PretrainedParts,
} from './pretrained.js';
export { runShape, defaultMemoryLimits } from './fits.js';
export {
  type MemoryEstimate,
  type MemoryLimits,
  type RunShape,
  MemoryError,
  countParameters,
  countLoraParameters,
  type RunLora,
  estimateTrainingMemory,
  describeEstimate,
  checkFits,
} from './memory.js';
