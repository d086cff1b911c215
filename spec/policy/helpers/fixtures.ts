import { Rng } from '../../../src/core/rng.js';
import {
  initParams,
  smallConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../../../src/nn/transformer.js';
import { additionTask, countdownTask, multiplicationTask, tokenizerFor } from '../../../src/tasks/index.js';

/** One tokenizer for every built-in task, and tiny models over it. */
export const tokenizer = tokenizerFor(additionTask(), multiplicationTask(), countdownTask());

export function tinyConfig(overrides: Partial<TransformerConfig> = {}): TransformerConfig {
  return smallConfig(tokenizer.vocabSize, {
    dModel: 16,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dFf: 24,
    maxSeqLen: 32,
    ...overrides,
  });
}

/** A random model with a large init std, so its next-token distributions are far from uniform. */
export function peakedParams(config: TransformerConfig, seed: number, dtype: 'f32' | 'f64' = 'f32'): TransformerParams {
  return initParams(config, new Rng(seed), { dtype, std: 0.5 });
}
