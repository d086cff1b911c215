import { ArgumentError } from '../core/errors.js';
import type { Tokenizer } from '../tasks/tokenizer.js';

/**
 * The layout every sequence batch uses (rollouts, SFT examples, rescoring): row b is
 *   [PAD ... PAD, BOS, prompt tokens]  [completion tokens, EOS, PAD ... PAD]
 *   |<-------- promptLen P -------->|  |<-------- completionLen C ------->|
 * Prompts are left-padded so that every completion starts at column P, which lets one slice of the hidden
 * states feed the LM head for all completion positions. Host arrays: the trainer slices rows for minibatches
 * and uploads them per step.
 */
export interface SequenceBatch {
  readonly batchSize: number;
  readonly promptLen: number;
  readonly completionLen: number;
  /** Token ids [B, P + C], row-major. */
  readonly tokens: Int32Array;
  /** 1 for real tokens (prompt and completion), 0 for padding, [B, P + C]. */
  readonly attentionMask: Uint8Array;
  /** 1 for completion tokens that are scored (the sampled tokens, EOS included), 0 elsewhere, [B, C]. */
  readonly completionMask: Float32Array;
}

export const seqLen = (b: SequenceBatch): number => b.promptLen + b.completionLen;

/** [BOS, ...prompt], or the chat template's rendering of the prompt as a user turn (`Tokenizer.promptIds`). */
export const encodePrompt = (tok: Tokenizer, prompt: string): number[] => tok.promptIds(prompt);

/** [...completion, EOS]. */
export const encodeCompletion = (tok: Tokenizer, completion: string): number[] => [...tok.encode(completion), tok.eos];

/**
 * Pack prompt and completion token lists into the layout above. `promptLen` / `completionLen` may be given to
 * pad wider than the longest row (fixed shapes across steps).
 */
export function packSequences(
  prompts: readonly (readonly number[])[],
  completions: readonly (readonly number[])[],
  pad: number,
  opts: { promptLen?: number; completionLen?: number } = {},
): SequenceBatch {
  if (prompts.length !== completions.length)
    throw new ArgumentError('packSequences', `${prompts.length} prompts but ${completions.length} completions`);
  const p = opts.promptLen ?? prompts.reduce((m, x) => Math.max(m, x.length), 0);
  const c = opts.completionLen ?? completions.reduce((m, x) => Math.max(m, x.length), 0);
  const b = prompts.length;
  const t = p + c;
  const tokens = new Int32Array(b * t).fill(pad);
  const attentionMask = new Uint8Array(b * t);
  const completionMask = new Float32Array(b * c);
  for (let r = 0; r < b; r++) {
    const pr = prompts[r]!;
    const co = completions[r]!;
    if (pr.length > p || co.length > c)
      throw new ArgumentError(
        'packSequences',
        `row ${r} (${pr.length} + ${co.length} tokens) does not fit ${p} + ${c}`,
      );
    if (pr.length === 0)
      throw new ArgumentError('packSequences', `row ${r} has an empty prompt (it needs at least BOS)`);
    pr.forEach((id, j) => {
      tokens[r * t + p - pr.length + j] = id;
      attentionMask[r * t + p - pr.length + j] = 1;
    });
    co.forEach((id, j) => {
      tokens[r * t + p + j] = id;
      attentionMask[r * t + p + j] = 1;
      completionMask[r * c + j] = 1;
    });
  }
  return { batchSize: b, promptLen: p, completionLen: c, tokens, attentionMask, completionMask };
}

/** The rows `rows` of a batch (a minibatch), same P and C. */
export function selectRows(batch: SequenceBatch, rows: readonly number[]): SequenceBatch {
  const t = seqLen(batch);
  const c = batch.completionLen;
  const tokens = new Int32Array(rows.length * t);
  const attentionMask = new Uint8Array(rows.length * t);
  const completionMask = new Float32Array(rows.length * c);
  rows.forEach((r, i) => {
    if (!(r >= 0 && r < batch.batchSize))
      throw new ArgumentError('selectRows', `row ${r} is out of range for ${batch.batchSize} rows`);
    tokens.set(batch.tokens.subarray(r * t, (r + 1) * t), i * t);
    attentionMask.set(batch.attentionMask.subarray(r * t, (r + 1) * t), i * t);
    completionMask.set(batch.completionMask.subarray(r * c, (r + 1) * c), i * c);
  });
  return {
    batchSize: rows.length,
    promptLen: batch.promptLen,
    completionLen: c,
    tokens,
    attentionMask,
    completionMask,
  };
}

/** Pick rows of a per-row [B, C] host array (log-probs recorded at sampling, say) in the same way. */
export function selectRowValues(values: Float32Array, completionLen: number, rows: readonly number[]): Float32Array {
  const out = new Float32Array(rows.length * completionLen);
  rows.forEach((r, i) => out.set(values.subarray(r * completionLen, (r + 1) * completionLen), i * completionLen));
  return out;
}

/**
 * RoPE positions and the key bias of a batch: a row's first real token is position 0 (left padding does not
 * shift positions, as Hugging Face derives position_ids from the attention mask); padding keys get PAD_BIAS.
 */
export function positionsAndBias(
  batch: SequenceBatch,
  padBias: number,
): { positions: Int32Array; keyBias: Float64Array } {
  const t = seqLen(batch);
  const positions = new Int32Array(batch.batchSize * t);
  const keyBias = new Float64Array(batch.batchSize * t);
  for (let r = 0; r < batch.batchSize; r++) {
    let first = t;
    for (let j = 0; j < t; j++)
      if (batch.attentionMask[r * t + j]) {
        first = j;
        break;
      }
    for (let j = 0; j < t; j++) {
      positions[r * t + j] = Math.max(0, j - first);
      keyBias[r * t + j] = batch.attentionMask[r * t + j] ? 0 : padBias;
    }
  }
  return { positions, keyBias };
}
