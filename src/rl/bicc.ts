import * as E from 'fp-ts/lib/Either.js';
import type { Tensor } from '../core/tensor.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { seqLen, type SequenceBatch } from './batch.js';
import { groupsOf, rowCompletion, rowPrompt, shareBudget, traceContent, tracesThatFit } from './bicc-layout.js';
import { BiccError, parseBiccOptions, type BiccOptions } from './bicc-options.js';
import { scoreLogProbs, type ScoreOptions } from './score.js';

/**
 * BICC (Bilateral Context Conditioning) as a transformation of a batch at training time. Each positive rollout
 * is scored under [query; the group's negatives] and each negative under [query; the group's positives]; the
 * completion block of every row is unchanged, so the log-probs of the conditioned batch line up with the plain
 * batch's completion mask, pi_old and pi_ref (which stay on the plain context). Sampling never sees this.
 *
 * Layout of a conditioned row (docs/ARCHITECTURE.md, "BICC"), S the separator (default [EOS]):
 *   [PAD.., BOS, query, S, trace_1, S, trace_2, ..., S, trace_k, S] [completion block of the plain row]
 * or, with `placement: 'before-query'` (the trainer's), the same inserted tokens before the plain prompt:
 *   [PAD.., S, trace_1, S, trace_2, ..., S, trace_k, S, BOS, query] [completion block of the plain row]
 * - trace_i: the completion of the i-th opposite-class rollout of the group in increasing row order, without a
 *   final EOS, cut at its end to its share of the room;
 * - room = min(floor(contextShare * contextBudget), contextBudget - |BOS, query| - C): everything between the
 *   query and the completion block (separators included) fits it, so prompt + inserted + C <= contextBudget;
 * - k: as many traces as fit with one token each (the last ones in order are dropped first); the token budget
 *   is shared equally with water-filling (`shareBudget`);
 * - a row of a group without both classes, or with no room for even one token of one trace, is the plain row.
 */

export {
  BiccError,
  BICC_DEFAULTS,
  BICC_PLACEMENTS,
  parseBiccOptions,
  type BiccOptions,
  type BiccPlacement,
} from './bicc-options.js';

/** A plain batch with the host information BICC needs: each row's reward and group id. */
export interface BiccInput extends SequenceBatch {
  readonly rewards: readonly number[];
  readonly groupIds: readonly number[];
}

/** One inserted trace: the row it came from and how many of its tokens were kept. */
export interface InsertedTrace {
  readonly row: number;
  readonly tokens: number;
}

export interface ConditionedBatch {
  /** Same rows and completion block (C, tokens, masks) as the input; the prompt part carries the context. */
  readonly batch: SequenceBatch;
  /** Whether the row got inserted context (false: it is the plain row, left-padded to the new width). */
  readonly conditioned: readonly boolean[];
  /** Tokens inserted into each row (traces and separators), 0 for plain rows. */
  readonly insertedTokens: readonly number[];
  /** The traces inserted into each row, in order. */
  readonly traces: readonly (readonly InsertedTrace[])[];
  /** reward > threshold, per row. */
  readonly positive: readonly boolean[];
}

/** The input of a `Rollouts` (row r's group is its prompt index) with the rewards the verifier gave. */
export const biccInput = (
  rollouts: SequenceBatch & { readonly promptIndex: readonly number[] },
  rewards: readonly number[],
): BiccInput => ({
  batchSize: rollouts.batchSize,
  promptLen: rollouts.promptLen,
  completionLen: rollouts.completionLen,
  tokens: rollouts.tokens,
  attentionMask: rollouts.attentionMask,
  completionMask: rollouts.completionMask,
  rewards,
  groupIds: rollouts.promptIndex,
});

function checkInput(input: BiccInput, config: Pick<TransformerConfig, 'maxSeqLen'>): void {
  const { batchSize: b, promptLen: p, completionLen: c } = input;
  if (!(Number.isInteger(b) && b >= 1 && Number.isInteger(p) && p >= 1 && Number.isInteger(c) && c >= 0)) {
    throw new BiccError(
      'batch',
      { batchSize: b, promptLen: p, completionLen: c },
      'needs batchSize >= 1, promptLen >= 1, completionLen >= 0',
    );
  }
  const t = p + c;
  if (input.tokens.length !== b * t || input.attentionMask.length !== b * t)
    throw new BiccError('batch.tokens', input.tokens.length, `must have B * (P + C) = ${b * t} entries`);
  if (input.completionMask.length !== b * c)
    throw new BiccError('batch.completionMask', input.completionMask.length, `must have B * C = ${b * c} entries`);
  if (t > config.maxSeqLen)
    throw new BiccError(
      'batch',
      t,
      `the plain batch (P + C = ${p} + ${c}) already exceeds maxSeqLen ${config.maxSeqLen}`,
    );
  for (const f of ['rewards', 'groupIds'] as const) {
    const xs = input[f];
    if (xs.length !== b) throw new BiccError(f, xs.length, `must have one entry per row (${b})`);
    const bad = xs.findIndex((x) => typeof x !== 'number' || !Number.isFinite(x));
    if (bad >= 0) throw new BiccError(`${f}[${bad}]`, xs[bad], 'must be a finite number');
  }
}

interface Resolved {
  readonly room: number;
  readonly budget: number;
  readonly sep: readonly number[];
  readonly threshold: number;
}

function resolve(
  opts: BiccOptions,
  tokenizer: Tokenizer,
  config: Pick<TransformerConfig, 'maxSeqLen' | 'vocabSize'>,
): Resolved {
  const budget = opts.contextBudget ?? config.maxSeqLen;
  if (budget > config.maxSeqLen)
    throw new BiccError('contextBudget', budget, `must not exceed maxSeqLen ${config.maxSeqLen}`);
  const sep = opts.separator ?? [tokenizer.eos];
  const vocab = Math.min(tokenizer.vocabSize, config.vocabSize);
  const bad = sep.find((id) => id >= vocab || id === tokenizer.pad);
  if (bad !== undefined)
    throw new BiccError('separator', sep, `token ${bad} is padding or outside the vocabulary (${vocab})`);
  return { room: Math.floor(opts.contextShare * budget), budget, sep, threshold: opts.threshold };
}

/**
 * Build the conditioned batch of a step (one padded `SequenceBatch` for all rows; see the layout above). Pure:
 * the input is not modified. Throws a `BiccError` naming the field on bad options or input, or when the plain
 * batch itself does not fit `maxSeqLen`.
 */
export function conditionBatch(
  input: BiccInput,
  tokenizer: Tokenizer,
  config: Pick<TransformerConfig, 'maxSeqLen' | 'vocabSize'>,
  options: Partial<BiccOptions> | Readonly<Record<string, unknown>> = {},
): ConditionedBatch {
  const parsed = parseBiccOptions(options);
  if (E.isLeft(parsed)) throw parsed.left;
  const { room, budget, sep, threshold } = resolve(parsed.right, tokenizer, config);
  const before = parsed.right.placement === 'before-query';
  checkInput(input, config);
  const b = input.batchSize;
  const c = input.completionLen;
  const positive = input.rewards.map((r) => r > threshold);
  const prompts = Array.from({ length: b }, (_, r) => rowPrompt(input, r));
  const contents = Array.from({ length: b }, (_, r) => traceContent(rowCompletion(input, r), tokenizer.eos));
  const newPrompts = [...prompts];
  const traces: InsertedTrace[][] = prompts.map(() => []);
  for (const rows of groupsOf(input.groupIds)) {
    for (const r of rows) {
      const opposite = rows.filter((o) => positive[o] !== positive[r]);
      const rowRoom = Math.min(room, budget - prompts[r]!.length - c);
      const k = tracesThatFit(opposite.length, rowRoom, sep.length);
      if (k === 0) continue;
      const used = opposite.slice(0, k);
      const keep = shareBudget(
        used.map((o) => contents[o]!.length),
        rowRoom - (k + 1) * sep.length,
      );
      const context: number[] = [];
      used.forEach((o, i) => {
        for (const id of sep) context.push(id);
        for (const id of contents[o]!.slice(0, keep[i]!)) context.push(id);
        traces[r]!.push({ row: o, tokens: keep[i]! });
      });
      for (const id of sep) context.push(id);
      newPrompts[r] = before ? [...context, ...prompts[r]!] : [...prompts[r]!, ...context];
    }
  }
  const batch = assemble(input, newPrompts, tokenizer.pad);
  return {
    batch,
    conditioned: traces.map((ts) => ts.length > 0),
    insertedTokens: newPrompts.map((pr, r) => pr.length - prompts[r]!.length),
    traces,
    positive,
  };
}

/** Left-pad the new prompts to a common width P' >= P and copy each row's completion block verbatim. */
function assemble(input: SequenceBatch, prompts: readonly (readonly number[])[], pad: number): SequenceBatch {
  const b = input.batchSize;
  const c = input.completionLen;
  const t0 = seqLen(input);
  // Never narrower than the input, so a batch with nothing inserted comes back identical.
  const p = prompts.reduce((m, x) => Math.max(m, x.length), input.promptLen);
  const t = p + c;
  const tokens = new Int32Array(b * t).fill(pad);
  const attentionMask = new Uint8Array(b * t);
  for (let r = 0; r < b; r++) {
    const pr = prompts[r]!;
    tokens.set(pr, r * t + p - pr.length);
    attentionMask.fill(1, r * t + p - pr.length, r * t + p);
    tokens.set(input.tokens.subarray(r * t0 + input.promptLen, (r + 1) * t0), r * t + p);
    attentionMask.set(input.attentionMask.subarray(r * t0 + input.promptLen, (r + 1) * t0), r * t + p);
  }
  return {
    batchSize: b,
    promptLen: p,
    completionLen: c,
    tokens,
    attentionMask,
    completionMask: Float32Array.from(input.completionMask),
  };
}

/**
 * log pi_theta of the completion tokens under the conditioned context, [B, C]: `scoreLogProbs` on the
 * conditioned batch, one batched forward for all rows. It goes into `RolloutBatch.logProbs`; `oldLogProbs`
 * and `refLogProbs` stay those of the plain rollouts. Nothing is detached: gradients reach the parameters
 * through attention to the inserted traces.
 */
export function biccLogProbs(
  params: TransformerParams,
  config: TransformerConfig,
  conditioned: SequenceBatch | ConditionedBatch,
  opts: ScoreOptions = {},
): Tensor {
  return scoreLogProbs(params, config, 'batch' in conditioned ? conditioned.batch : conditioned, opts);
}
