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
 * or, with `placement: 'before-query'` (the default), the same inserted tokens before the plain prompt:
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
  BICC_RATIOS,
  BICC_SIDES,
  parseBiccOptions,
  type BiccOptions,
  type BiccPlacement,
  type BiccRatio,
  type BiccSides,
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

function checkBatch(input: SequenceBatch, config: Pick<TransformerConfig, 'maxSeqLen'>): void {
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
}

function checkInput(input: BiccInput, config: Pick<TransformerConfig, 'maxSeqLen'>): void {
  checkBatch(input, config);
  const b = input.batchSize;
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
  const opts = parseOrThrow(options);
  const resolved = resolve(opts, tokenizer, config); // option errors are named before input errors
  checkInput(input, config);
  const b = input.batchSize;
  const positive = input.rewards.map((r) => r > opts.threshold);
  const contents = Array.from({ length: b }, (_, r) => traceContent(rowCompletion(input, r), tokenizer.eos));
  const opposite: number[][] = Array.from({ length: b }, () => []);
  const sided = (r: number): boolean => opts.sides === 'both' || positive[r] === (opts.sides === 'positives');
  for (const rows of groupsOf(input.groupIds))
    for (const r of rows) if (sided(r)) opposite[r] = rows.filter((o) => positive[o] !== positive[r]);
  const inserted = insertResolved(
    input,
    opposite.map((rows) => rows.map((o) => contents[o]!)),
    resolved,
    opts.placement,
    tokenizer.pad,
  );
  return {
    batch: inserted.batch,
    conditioned: inserted.kept.map((ks) => ks.length > 0),
    insertedTokens: inserted.insertedTokens,
    traces: inserted.kept.map((ks, r) => ks.map((tokens, i) => ({ row: opposite[r]![i]!, tokens }))),
    positive,
  };
}

/** A batch with context inserted before (or after) each row's query, and what went in. */
export interface InsertedContext {
  readonly batch: SequenceBatch;
  /** Tokens inserted into each row (traces and separators), 0 for rows left plain. */
  readonly insertedTokens: readonly number[];
  /** For each row, how many tokens of each inserted trace were kept (the first k traces; [] for a plain row). */
  readonly kept: readonly (readonly number[])[];
}

/**
 * Insert the given traces (token ids, without a final EOS) into each row of a batch in BICC's layout (see the top
 * of this file): the one door through which both the RL step's conditioned batch and the context-reading
 * warm-start (`contextWarmStartBatch`) build their rows, so the policy is taught exactly the layout BICC scores
 * under. A row with no traces, or no room for one token of one, stays plain. Pure.
 */
export function insertTraces(
  input: SequenceBatch,
  traces: readonly (readonly (readonly number[])[])[],
  tokenizer: Tokenizer,
  config: Pick<TransformerConfig, 'maxSeqLen' | 'vocabSize'>,
  options: Partial<BiccOptions> | Readonly<Record<string, unknown>> = {},
): InsertedContext {
  const opts = parseOrThrow(options);
  const resolved = resolve(opts, tokenizer, config);
  checkBatch(input, config);
  const b = input.batchSize;
  if (traces.length !== b) throw new BiccError('traces', traces.length, `must have one list per row (${b})`);
  return insertResolved(input, traces, resolved, opts.placement, tokenizer.pad);
}

/** `insertTraces` once the options are resolved and the input checked. */
function insertResolved(
  input: SequenceBatch,
  traces: readonly (readonly (readonly number[])[])[],
  { room, budget, sep }: Resolved,
  placement: BiccOptions['placement'],
  pad: number,
): InsertedContext {
  const before = placement === 'before-query';
  const b = input.batchSize;
  const c = input.completionLen;
  const prompts = Array.from({ length: b }, (_, r) => rowPrompt(input, r));
  const newPrompts = [...prompts];
  const kept: number[][] = prompts.map(() => []);
  for (let r = 0; r < b; r++) {
    const candidates = traces[r]!;
    const rowRoom = Math.min(room, budget - prompts[r]!.length - c);
    const k = tracesThatFit(candidates.length, rowRoom, sep.length);
    if (k === 0) continue;
    const used = candidates.slice(0, k);
    const keep = shareBudget(
      used.map((t) => t.length),
      rowRoom - (k + 1) * sep.length,
    );
    const context: number[] = [];
    used.forEach((t, i) => {
      for (const id of sep) context.push(id);
      for (const id of t.slice(0, keep[i]!)) context.push(id);
      kept[r]!.push(keep[i]!);
    });
    for (const id of sep) context.push(id);
    newPrompts[r] = before ? [...context, ...prompts[r]!] : [...prompts[r]!, ...context];
  }
  return {
    batch: assemble(input, newPrompts, pad),
    insertedTokens: newPrompts.map((pr, r) => pr.length - prompts[r]!.length),
    kept,
  };
}

function parseOrThrow(options: Partial<BiccOptions> | Readonly<Record<string, unknown>>): BiccOptions {
  const parsed = parseBiccOptions(options);
  if (E.isLeft(parsed)) throw parsed.left;
  return parsed.right;
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

/** How differently the policy scores a completion after the inserted context: per-token log pi(o|q) - log pi(o|c, q). */
export interface ContextLogRatio {
  /** Mean over the completion tokens of the conditioned rows (NaN when no row was conditioned). */
  readonly mean: number;
  /** Mean of its absolute value over the same tokens. */
  readonly meanAbs: number;
  /**
   * log of the mean per-token ratio pi(o|q) / pi(o|c, q) over the same tokens: dominated by the tokens the context
   * moves most (the first BICC runs measured mean ratios of 5e3 to 1e5).
   */
  readonly logMeanRatio: number;
  /** The mean over the positive rows' tokens, and over the negative rows' (NaN where there are none). */
  readonly positive: number;
  readonly negative: number;
  /** Completion tokens of the conditioned rows. */
  readonly tokens: number;
}

/**
 * The per-token log-ratio log pi(o_t | q, o_<t) - log pi(o_t | c, q, o_<t) over the conditioned rows' completion
 * tokens, from the plain and the conditioned log-probs of the same policy ([B, C] each, the completion mask [B, C]).
 * Near 0: the policy reads the inserted context as the same task, and BICC sharpens the objective; large: under the
 * context it is another distribution, and BICC changes the objective rather than sharpening it.
 */
export function contextLogRatio(
  plain: ArrayLike<number>,
  conditionedLogProbs: ArrayLike<number>,
  mask: ArrayLike<number>,
  conditioned: Pick<ConditionedBatch, 'conditioned' | 'positive'>,
): ContextLogRatio {
  const b = conditioned.conditioned.length;
  const c = b === 0 ? 0 : mask.length / b;
  const acc = { all: [0, 0, 0], pos: [0, 0], neg: [0, 0] };
  const diffs: number[] = [];
  for (let r = 0; r < b; r++) {
    if (!conditioned.conditioned[r]) continue;
    const side = conditioned.positive[r] ? acc.pos : acc.neg;
    for (let j = 0; j < c; j++) {
      const m = mask[r * c + j]!;
      if (m === 0) continue;
      const d = plain[r * c + j]! - conditionedLogProbs[r * c + j]!;
      diffs.push(d);
      acc.all[0]! += d;
      acc.all[1]! += Math.abs(d);
      acc.all[2]! += 1;
      side[0]! += d;
      side[1]! += 1;
    }
  }
  const n = acc.all[2]!;
  const top = diffs.reduce((m, d) => Math.max(m, d), Number.NEGATIVE_INFINITY);
  return {
    mean: acc.all[0]! / n,
    meanAbs: acc.all[1]! / n,
    logMeanRatio: n === 0 ? Number.NaN : top + Math.log(diffs.reduce((s, d) => s + Math.exp(d - top), 0) / n),
    positive: acc.pos[0]! / acc.pos[1]!,
    negative: acc.neg[0]! / acc.neg[1]!,
    tokens: n,
  };
}
