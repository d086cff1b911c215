import type { Rng } from '../core/rng.js';
import type { Tensor } from '../core/tensor.js';
import { tensor } from '../ops/creation.js';
import { mul, where } from '../ops/elementwise.js';
import { tokenLogProbs } from '../ops/loss.js';
import { slice } from '../ops/movement.js';
import {
  activationDType,
  hiddenStates,
  lmHead,
  PAD_BIAS,
  type TransformerConfig,
  type TransformerParams,
} from '../nn/transformer.js';
import { positionsAndBias, seqLen, type SequenceBatch } from './batch.js';

/**
 * Logits divided by the sampling temperature. The sampler and the training forward both go through this one
 * function, so the log-probs recorded at sampling and those of a fresh forward are the same numbers.
 * Temperature 0 (greedy) and 1 leave the logits as they are.
 */
export function scaleLogits(logits: Tensor, temperature: number): Tensor {
  return temperature === 1 || temperature === 0 ? logits : mul(logits, 1 / temperature);
}

export interface ScoreOptions {
  /** The temperature the completions were sampled at (default 1), as TRL scores them. */
  readonly temperature?: number;
  /** Draws LoRA dropout masks: a training forward's (none: the adapters see their input as it is). */
  readonly dropoutRng?: Rng | undefined;
  /** Gradient checkpointing: recompute each layer in the backward instead of keeping its activations. */
  readonly remat?: boolean;
}

/**
 * Per-token log-probs [B, C] of the completion tokens under the policy: entry (b, j) is
 * log pi(token[b, P + j] | tokens[b, < P + j]) of the temperature-scaled distribution, and 0 where the
 * completion mask is 0. This is the training forward the objectives consume; it is differentiable in `params`.
 */
export function scoreLogProbs(
  params: TransformerParams,
  config: TransformerConfig,
  batch: SequenceBatch,
  opts: ScoreOptions = {},
): Tensor {
  const { logits, targets, mask } = completionLogits(params, config, batch, opts);
  // The temperature scale is applied inside the fused kernel (as scaleLogits would): no scaled copy of the logits.
  const t = opts.temperature ?? 1;
  return where(mask, tokenLogProbs(logits, targets, t === 1 || t === 0 ? 1 : 1 / t), 0);
}

/** Logits [B, C, V] at the positions that predict the completion tokens, their targets [B, C] and mask [B, C]. */
export function completionLogits(
  params: TransformerParams,
  config: TransformerConfig,
  batch: SequenceBatch,
  opts: Pick<ScoreOptions, 'dropoutRng' | 'remat'> = {},
): { logits: Tensor; targets: Tensor; mask: Tensor } {
  const b = batch.batchSize;
  const t = seqLen(batch);
  const p = batch.promptLen;
  const c = batch.completionLen;
  const dtype = activationDType(params);
  const backend = params.embed.weight.backend;
  const { positions, keyBias } = positionsAndBias(batch, PAD_BIAS);
  const { hidden } = hiddenStates(params, config, tensor(batch.tokens, [b, t], { dtype: 'i32', backend }), {
    positions: tensor(positions, [b, t], { dtype: 'i32', backend }),
    keyBias: tensor(keyBias, [b, t], { dtype, backend }),
    ...(opts.dropoutRng ? { dropoutRng: opts.dropoutRng } : {}),
    ...(opts.remat ? { remat: true } : {}),
  });
  // Position P - 1 + j predicts completion token j: only those C rows go through the LM head.
  const h = slice(hidden, [0, p - 1, 0], [b, c, config.dModel]);
  const targets = new Int32Array(b * c);
  for (let r = 0; r < b; r++) targets.set(batch.tokens.subarray(r * t + p, (r + 1) * t), r * c);
  return {
    logits: lmHead(params, h),
    targets: tensor(targets, [b, c], { dtype: 'i32', backend }),
    mask: tensor(batch.completionMask, [b, c], { dtype, backend }),
  };
}
