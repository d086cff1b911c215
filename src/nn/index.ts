/** The transformer policy (Llama/Qwen layout), LoRA adapters on it, its optimizer and schedule. */
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
  type AdamWStepOptions,
  adamwInit,
  adamwStep,
  adamwScheduleValues,
  globalNorm,
} from './optim.js';
export { type LrSchedule, lrAt } from './schedule.js';
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
