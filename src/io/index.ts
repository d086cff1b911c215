/** Persistence: safetensors, atomic directories, checkpoints, Hub model directories and names, peft adapter files. */
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
  ADAPTER_FILES,
  peftName,
  peftNames,
  adapterConfigJson,
  parseAdapterConfig,
  writeAdapterFiles,
  readAdapter,
  readAdapterConfig,
} from './adapter-files.js';
