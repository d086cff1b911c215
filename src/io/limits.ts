import type { TransformerConfig } from '../nn/transformer.js';

/**
 * The largest model sizes a run accepts, the same whether they come from flags (`--d-model`, ...), a library
 * config or a Hub `config.json`: a typo (`1e8` layers) or a hostile file (`max_position_embeddings: 1e9`) fails at
 * once, before anything is sized by it. Generous for real models: Llama 3.1's 131,072 positions, Gemma's
 * 262,144-token vocabulary.
 */
export const MODEL_LIMITS: Readonly<Record<keyof ModelSized, number>> = {
  vocabSize: 1_048_576,
  dModel: 16_384,
  nLayers: 512,
  nHeads: 1_024,
  nKvHeads: 1_024,
  headDim: 1_024,
  dFf: 65_536,
  maxSeqLen: 1_048_576,
};

type ModelSized = Required<
  Pick<TransformerConfig, 'vocabSize' | 'dModel' | 'nLayers' | 'nHeads' | 'nKvHeads' | 'headDim' | 'dFf' | 'maxSeqLen'>
>;

/** The first size of `config` over its limit, as [field, value, limit], or null. */
export function sizeOverLimit(config: Partial<ModelSized>): [keyof ModelSized, number, number] | null {
  for (const [key, limit] of Object.entries(MODEL_LIMITS) as [keyof ModelSized, number][]) {
    const v = config[key];
    if (typeof v === 'number' && v > limit) return [key, v, limit];
  }
  return null;
}
