import { seqLen, type SequenceBatch } from './batch.js';

/**
 * Host-side token bookkeeping for BICC (integer arrays only): reading a row's parts out of a `SequenceBatch`, and
 * deciding how much of each inserted trace fits a row's room. `bicc.ts` assembles the conditioned batch from these.
 */

/** The real prompt tokens of row r ([BOS, query]): the attended columns left of the completion block. */
export function rowPrompt(batch: SequenceBatch, r: number): number[] {
  const t = seqLen(batch);
  const out: number[] = [];
  for (let j = 0; j < batch.promptLen; j++) if (batch.attentionMask[r * t + j]) out.push(batch.tokens[r * t + j]!);
  return out;
}

/** The scored completion tokens of row r (completion mask 1, EOS included when the row finished). */
export function rowCompletion(batch: SequenceBatch, r: number): number[] {
  const t = seqLen(batch);
  const c = batch.completionLen;
  const out: number[] = [];
  for (let j = 0; j < c; j++) if (batch.completionMask[r * c + j]) out.push(batch.tokens[r * t + batch.promptLen + j]!);
  return out;
}

/**
 * What a completion contributes when inserted as context: its tokens without a final EOS. The separator that
 * follows every inserted trace marks its end, so a finished and an unfinished trace both end in exactly one
 * separator instead of the finished one reading EOS + separator.
 */
export function traceContent(completion: readonly number[], eos: number): number[] {
  return completion.length > 0 && completion[completion.length - 1] === eos ? completion.slice(0, -1) : [...completion];
}

/**
 * How many of n traces fit into `room` tokens when each needs its separator, one closing separator follows
 * them all, and each keeps at least one token: the largest k <= n with (k + 1) * sepLen + k <= room. Traces past
 * the k-th are dropped (the last ones in order), so a small room shows a few traces rather than n slivers.
 */
export function tracesThatFit(n: number, room: number, sepLen: number): number {
  if (room < 2 * sepLen + 1) return 0;
  return Math.min(n, Math.floor((room - sepLen) / (sepLen + 1)));
}

/**
 * Split `total` tokens among traces of the given lengths, equal shares with water-filling: a trace shorter than
 * its share keeps all its tokens and the surplus goes to the longer ones; when the division leaves a remainder,
 * the earliest traces still being cut get one token more. The result is what dealing tokens one at a time,
 * round-robin in trace order, would give; every trace is then cut at its end (its first tokens are kept).
 */
export function shareBudget(lengths: readonly number[], total: number): number[] {
  const alloc = lengths.map(() => 0);
  let remaining = Math.max(0, Math.floor(total));
  let active = lengths.map((_, i) => i).filter((i) => lengths[i]! > 0);
  while (active.length > 0 && remaining >= active.length) {
    const share = Math.floor(remaining / active.length);
    const need = active.reduce((m, i) => Math.min(m, lengths[i]! - alloc[i]!), Number.POSITIVE_INFINITY);
    const step = Math.min(share, need);
    for (const i of active) alloc[i]! += step;
    remaining -= step * active.length;
    active = active.filter((i) => alloc[i]! < lengths[i]!);
  }
  for (const i of active.slice(0, remaining)) alloc[i]! += 1;
  return alloc;
}

/** Rows grouped by id, each group's rows in increasing row index, groups in order of first appearance. */
export function groupsOf(groupIds: readonly number[]): number[][] {
  const byId = new Map<number, number[]>();
  groupIds.forEach((g, r) => {
    const rows = byId.get(g);
    if (rows) rows.push(r);
    else byId.set(g, [r]);
  });
  return [...byId.values()];
}
