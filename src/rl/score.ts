import type { Backend } from '../core/backend.js';
import type { DType } from '../core/dtype.js';
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
  batch: SequenceBatch | BatchTensors,
  opts: ScoreOptions = {},
): Tensor {
  const { logits, targets, mask } = completionLogits(params, config, batch, opts);
  // The temperature scale is applied inside the fused kernel (as scaleLogits would): no scaled copy of the logits.
  const t = opts.temperature ?? 1;
  return where(mask, tokenLogProbs(logits, targets, t === 1 || t === 0 ? 1 : 1 / t), 0);
}

/**
 * A sequence batch as the tensors the training forward reads (`batchTensors` makes them from a `SequenceBatch`):
 * token ids, RoPE positions and the padding key bias [B, P + C], and the completion's targets and mask [B, C]. The
 * forward, the scores and the SFT loss take either form; this one is what a recorded step (`recordStep`) takes
 * as an input, so that each run reads its own batch (of the recorded shapes) instead of the recording's.
 */
export type BatchTensors = {
  readonly tokens: Tensor;
  readonly positions: Tensor;
  readonly keyBias: Tensor;
  readonly targets: Tensor;
  readonly mask: Tensor;
};

/** `batch` on `backend`, the key bias and mask in `dtype` (the model's activation dtype, `activationDType`). */
export function batchTensors(batch: SequenceBatch, backend: Backend, dtype: DType = 'f32'): BatchTensors {
  const [b, t, p, c] = [batch.batchSize, seqLen(batch), batch.promptLen, batch.completionLen];
  const { positions, keyBias } = positionsAndBias(batch, PAD_BIAS);
  const targets = new Int32Array(b * c);
  for (let r = 0; r < b; r++) targets.set(batch.tokens.subarray(r * t + p, (r + 1) * t), r * c);
  return {
    tokens: tensor(batch.tokens, [b, t], { dtype: 'i32', backend }),
    positions: tensor(positions, [b, t], { dtype: 'i32', backend }),
    keyBias: tensor(keyBias, [b, t], { dtype, backend }),
    targets: tensor(targets, [b, c], { dtype: 'i32', backend }),
    mask: tensor(batch.completionMask, [b, c], { dtype, backend }),
  };
}

export const isBatchTensors = (batch: SequenceBatch | BatchTensors): batch is BatchTensors => 'positions' in batch;

/** Logits [B, C, V] at the positions that predict the completion tokens, their targets [B, C] and mask [B, C]. */
export function completionLogits(
  params: TransformerParams,
  config: TransformerConfig,
  batch: SequenceBatch | BatchTensors,
  opts: Pick<ScoreOptions, 'dropoutRng' | 'remat'> = {},
): { logits: Tensor; targets: Tensor; mask: Tensor } {
  const bt = isBatchTensors(batch) ? batch : batchTensors(batch, params.embed.weight.backend, activationDType(params));
  const [b, t] = bt.tokens.shape as [number, number];
  const c = bt.targets.shape[1]!;
  const { hidden } = hiddenStates(params, config, bt.tokens, {
    positions: bt.positions,
    keyBias: bt.keyBias,
    ...(opts.dropoutRng ? { dropoutRng: opts.dropoutRng } : {}),
    ...(opts.remat ? { remat: true } : {}),
  });
  // Position P - 1 + j predicts completion token j: only those C rows go through the LM head.
  const h = slice(hidden, [0, t - c - 1, 0], [b, c, config.dModel]);
  return { logits: lmHead(params, h), targets: bt.targets, mask: bt.mask };
}
