import type { Rng } from '../core/rng.js';
import type { Tensor } from '../core/tensor.js';
import { clamp, div, neg } from '../ops/elementwise.js';
import { sum } from '../ops/reduce.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import type { Problem, Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { encodeCompletion, encodePrompt, packSequences, type SequenceBatch } from './batch.js';
import { isBatchTensors, scoreLogProbs, type BatchTensors } from './score.js';

/** Supervised warm-start: worked solutions as (prompt, completion) pairs and a masked next-token loss. */
export interface SftExample {
  readonly prompt: string;
  readonly completion: string;
}

/** Each problem with its task's worked solution. */
export const sftExamples = <P extends Problem>(task: Task<P>, problems: readonly P[]): SftExample[] =>
  problems.map((p) => ({ prompt: p.prompt, completion: task.workedSolution(p) }));

/** Pack examples as [BOS prompt][completion EOS] in the shared batch layout; the completion (with EOS) is the target. */
export function sftBatch(
  tokenizer: Tokenizer,
  examples: readonly SftExample[],
  opts: { promptLen?: number; completionLen?: number } = {},
): SequenceBatch {
  return packSequences(
    examples.map((e) => encodePrompt(tokenizer, e.prompt)),
    examples.map((e) => encodeCompletion(tokenizer, e.completion)),
    tokenizer.pad,
    opts,
  );
}

/** Mean cross-entropy over the completion tokens of the batch (prompt tokens and padding are not targets). */
export function sftLoss(
  params: TransformerParams,
  config: TransformerConfig,
  batch: SequenceBatch | BatchTensors,
  opts: { readonly dropoutRng?: Rng | undefined; readonly remat?: boolean } = {},
): Tensor {
  const total = neg(sum(scoreLogProbs(params, config, batch, opts)));
  // A batch as tensors counts its targets on the device (a recorded step reads each run's own mask).
  if (isBatchTensors(batch)) return div(total, clamp(sum(batch.mask), 1, null));
  let count = 0;
  for (const m of batch.completionMask) count += m;
  return div(total, Math.max(1, count));
}
