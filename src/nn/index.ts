/** The transformer policy (Llama/Qwen layout), its optimizer and schedule, and checkpoints in safetensors. */
export {
  type TransformerConfig,
  type TransformerParams,
  type LayerParams,
  type ForwardOptions,
  type InitOptions,
  smallConfig,
  validateConfig,
  headDim,
  initParams,
  hiddenStates,
  activationDType,
  lmHead,
  forward,
  forwardWithCache,
  PAD_BIAS,
} from './transformer.js';
export { type ParamsLike, paramShapes } from './parameters.js';
export { type KvCache, createKvCache, disposeCache } from './kv-cache.js';
export { type RopeTables, ropeTables, ropeAt, applyRope } from './rope.js';
export {
  type AdamWConfig,
  type OptimizerState,
  type AdamWStepResult,
  adamwInit,
  adamwStep,
  globalNorm,
} from './optim.js';
export { type LrSchedule, lrAt } from './schedule.js';
export {
  CheckpointError,
  type CheckpointErrorKind,
  type HostTensor,
  type SafetensorsFile,
  encodeSafetensors,
  decodeSafetensors,
} from './safetensors.js';
export {
  toHfNames,
  fromHfNames,
  expectedShapes,
  buildParams,
  toHfConfig,
  fromHfConfig,
  architectureOf,
  ARCHITECTURES,
  type Architecture,
  type LoadOptions,
} from './hf.js';
export { type Checkpoint, type Json, CHECKPOINT_FILES, saveCheckpoint, loadCheckpoint } from './checkpoint.js';
export {
  loadHfCheckpoint,
  saveHfCheckpoint,
  HF_FILES,
  COMPANION_FILES,
  type HfModel,
  type HfTokenIds,
  type HfLoadOptions,
  type HfSaveOptions,
  type HfSaveResult,
} from './hf-checkpoint.js';
export {
  readSafetensorsIndex,
  streamTensors,
  streamTensorsKeepingHalf,
  type HalfHostTensor,
  writeSafetensorsFile,
  tensorsToWrite,
  type SafetensorsIndex,
  type TensorToWrite,
  type StoredDType,
} from './safetensors-file.js';
export { checkpointToBytes, checkpointToBlob, checkpointFromBytes } from './checkpoint-bytes.js';
export {
  type LoraConfig,
  type LoraLayer,
  type LoraModule,
  type LoraPair,
  type LoraWeights,
  LORA_MODULES,
  LORA_DEFAULTS,
  parseTargetModules,
  loraConfigProblem,
  loraScaling,
  initLora,
  withLora,
  withoutLora,
  trainableOf,
  withTrainable,
  mergeLora,
} from './lora.js';
export {
  ADAPTER_FILES,
  peftName,
  peftNames,
  adapterConfigJson,
  parseAdapterConfig,
  writeAdapterFiles,
  readAdapter,
  readAdapterConfig,
} from './adapter-files.js';
