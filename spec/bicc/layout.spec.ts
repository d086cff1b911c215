import fc from 'fast-check';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { encodeCompletion, encodePrompt, packSequences, positionsAndBias } from '../../src/rl/batch.js';
import { BICC_DEFAULTS, BiccError, conditionBatch, parseBiccOptions } from '../../src/rl/bicc.js';
import { TRAIN_DEFAULTS } from '../../src/training/config.js';
import { shareBudget } from '../../src/rl/bicc-layout.js';
import { expectedPrompt, tokenizer, type PlainRow } from './helpers.js';

const V = tokenizer.vocabSize;
const tok = fc.integer({ min: 3, max: V - 1 }); // ordinary symbols: never PAD, BOS or EOS

/** Random groups (G 2..8, 1..3 groups, ids possibly interleaved), prompts, completions (finished or cut), rewards. */
const arbRows = fc
  .array(
    fc.record({
      query: fc.array(tok, { minLength: 0, maxLength: 6 }),
      members: fc.array(
        fc.record({
          content: fc.array(tok, { minLength: 0, maxLength: 7 }),
          finished: fc.boolean(),
          reward: fc.constantFrom(0, 1, 0.25, 0.75, 0.5),
        }),
        { minLength: 2, maxLength: 8 },
      ),
    }),
    { minLength: 1, maxLength: 3 },
  )
  .chain((groups) => {
    const rows: PlainRow[] = groups.flatMap((g, gi) =>
      g.members.map((m) => ({
        prompt: [tokenizer.bos, ...g.query],
        completion: m.finished ? [...m.content, tokenizer.eos] : m.content,
        reward: m.reward,
        group: gi * 7 + 3,
      })),
    );
    return fc.shuffledSubarray(rows, { minLength: rows.length, maxLength: rows.length });
  });

const arbCase = fc.record({
  rows: arbRows,
  share: fc.double({ min: 0.01, max: 0.99, noNaN: true }),
  extraWidth: fc.integer({ min: 0, max: 30 }),
  budgetCut: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
  sep: fc.array(fc.integer({ min: 1, max: V - 1 }), { minLength: 1, maxLength: 3 }),
  widerPrompt: fc.integer({ min: 0, max: 2 }),
});

const traceLength = (row: PlainRow): number =>
  row.completion.length - (row.completion[row.completion.length - 1] === tokenizer.eos ? 1 : 0);

describe('BICC layout', () => {
  it('keeps every completion block and mask, inserts exactly the documented opposite-class context, within the budget', () => {
    // How often the runs hit the interesting cases (checked at the end so the property cannot pass vacuously).
    const seen = { conditioned: 0, plainInMixedBatch: 0, truncated: 0, dropped: 0 };
    fc.assert(
      fc.property(arbCase, ({ rows, share, extraWidth, budgetCut, sep, widerPrompt }) => {
        const p0 = Math.max(...rows.map((x) => x.prompt.length)) + widerPrompt;
        const plain = packSequences(
          rows.map((x) => x.prompt),
          rows.map((x) => x.completion),
          tokenizer.pad,
          { promptLen: p0 },
        );
        const c = plain.completionLen;
        const maxSeqLen = p0 + c + extraWidth;
        const budget = budgetCut === undefined ? maxSeqLen : Math.max(1, maxSeqLen - budgetCut);
        const input = { ...plain, rewards: rows.map((x) => x.reward), groupIds: rows.map((x) => x.group) };
        const snapshot = [Array.from(plain.tokens), Array.from(plain.attentionMask), Array.from(plain.completionMask)];
        const opts = {
          placement: 'after-query' as const,
          contextShare: share,
          separator: sep,
          ...(budgetCut === undefined ? {} : { contextBudget: budget }),
        };
        const out = conditionBatch(input, tokenizer, { maxSeqLen, vocabSize: V }, opts);
        const b = out.batch;
        const p = b.promptLen;
        const t = p + c;

        // Shapes: same rows and completion width; never wider than the model allows.
        expect([b.batchSize, b.completionLen]).toEqual([rows.length, c]);
        expect(p).toBeGreaterThanOrEqual(p0);
        expect(p + c).toBeLessThanOrEqual(maxSeqLen);
        expect(Array.from(b.completionMask)).toEqual(Array.from(plain.completionMask));
        const { positions } = positionsAndBias(b, -1e9);

        rows.forEach((row, r) => {
          // Completion block: token for token, attention mask included.
          expect(Array.from(b.tokens.subarray(r * t + p, (r + 1) * t))).toEqual(
            Array.from(plain.tokens.subarray(r * (p0 + c) + p0, (r + 1) * (p0 + c))),
          );
          expect(Array.from(b.attentionMask.subarray(r * t + p, (r + 1) * t))).toEqual(
            Array.from(plain.attentionMask.subarray(r * (p0 + c) + p0, (r + 1) * (p0 + c))),
          );
          // Prompt part: left padding, then the real tokens as one contiguous run ending at column P'.
          const mask = Array.from(b.attentionMask.subarray(r * t, r * t + p));
          const first = mask.indexOf(1);
          expect(first).toBeGreaterThanOrEqual(0);
          expect(mask.slice(first).every((m) => m === 1) && mask.slice(0, first).every((m) => m === 0)).toBe(true);
          expect(Array.from(b.tokens.subarray(r * t, r * t + first)).every((x) => x === tokenizer.pad)).toBe(true);
          const got = Array.from(b.tokens.subarray(r * t + first, r * t + p));

          const want = expectedPrompt(rows, r, { share, budget, sep, threshold: 0.5, c, eos: tokenizer.eos });
          expect(got).toEqual(want ? want.prompt : row.prompt);
          expect(out.conditioned[r]).toBe(want !== null);
          expect(out.insertedTokens[r]).toBe(got.length - row.prompt.length);
          expect(out.positive[r]).toBe(row.reward > 0.5);
          if (want) {
            seen.conditioned++;
            if (out.conditioned.includes(false)) seen.plainInMixedBatch++;
            if (want.sources.some((x) => x.tokens < traceLength(rows[x.row]!))) seen.truncated++;
            if (
              want.sources.length <
              rows.filter((o) => o.group === row.group && o.reward > 0.5 !== row.reward > 0.5).length
            )
              seen.dropped++;
            expect(out.traces[r]).toEqual(want.sources);
            expect(got.length + c).toBeLessThanOrEqual(budget);
            expect(out.insertedTokens[r]).toBeLessThanOrEqual(Math.floor(share * budget));
            // The inserted segments, read back through the separators, are prefixes of opposite-class rollouts of
            // the same group, in row order.
            let at = row.prompt.length;
            let prev = -1;
            for (const tr of out.traces[r]!) {
              const src = rows[tr.row]!;
              expect(src.group).toBe(row.group);
              expect(src.reward > 0.5).toBe(row.reward <= 0.5);
              expect(tr.row).toBeGreaterThan(prev);
              prev = tr.row;
              expect(got.slice(at, at + sep.length)).toEqual(sep);
              at += sep.length;
              expect(got.slice(at, at + tr.tokens)).toEqual(src.completion.slice(0, tr.tokens));
              at += tr.tokens;
            }
            expect(got.slice(at)).toEqual(sep);
          } else {
            expect(out.traces[r]).toEqual([]);
          }
          // The scored tokens sit right after the (conditioned) prompt: completion token j has RoPE position |prompt'| + j.
          for (let j = 0; j < c; j++) expect(positions[r * t + p + j]).toBe(got.length + j);
        });
        // Single-class groups are left as they were.
        rows.forEach((row, r) => {
          const mates = rows.filter((o) => o.group === row.group);
          if (mates.every((o) => o.reward > 0.5) || mates.every((o) => o.reward <= 0.5))
            expect(out.conditioned[r]).toBe(false);
        });
        // The input is not modified.
        expect([Array.from(plain.tokens), Array.from(plain.attentionMask), Array.from(plain.completionMask)]).toEqual(
          snapshot,
        );
      }),
      { numRuns: 300 },
    );
    expect(Math.min(seen.conditioned, seen.plainInMixedBatch, seen.truncated, seen.dropped)).toBeGreaterThan(20);
  });

  it("matches a worked example of 'after-query' (default separator EOS, default 40% share)", () => {
    const q = '12+34=';
    const comps = ['\\boxed{46}', '\\boxed{45}', '\\boxed{4', '\\boxed{3}'];
    const prompts = [q, q, q, '1+2='].map((s) => encodePrompt(tokenizer, s));
    const completions = comps.map((s, i) => (i === 2 ? tokenizer.encode(s) : encodeCompletion(tokenizer, s)));
    const plain = packSequences(prompts, completions, tokenizer.pad);
    const out = conditionBatch(
      { ...plain, rewards: [1, 0, 0, 1], groupIds: [0, 0, 0, 1] },
      tokenizer,
      { maxSeqLen: 48, vocabSize: V },
      { placement: 'after-query' },
    );
    const t = out.batch.promptLen + out.batch.completionLen;
    const row = (r: number): string =>
      tokenizer
        .decode(Array.from(out.batch.tokens.subarray(r * t, (r + 1) * t)), { keepSpecial: true })
        .replace(/<pad>/g, '');
    expect(row(0)).toBe('<bos>12+34=<eos>\\boxed{45}<eos>\\boxed{4<eos>\\boxed{46}<eos>');
    expect(row(1)).toBe('<bos>12+34=<eos>\\boxed{46}<eos>\\boxed{45}<eos>');
    expect(row(2)).toBe('<bos>12+34=<eos>\\boxed{46}<eos>\\boxed{4');
    expect(row(3)).toBe('<bos>1+2=\\boxed{3}<eos>');
    expect(out.conditioned).toEqual([true, true, true, false]);
    expect(out.insertedTokens).toEqual([9, 6, 6, 0]);
    // A tight budget cuts the traces, never the scored rollout: room = min(floor(0.4 * 20), 20 - 7 - 5) = 8 = 3 separators
    // + 5 tokens, dealt 3 to `\boxed{45}` (4 tokens: `\boxed{` is one symbol) and 2 to `\boxed{4`.
    const tight = conditionBatch(
      { ...plain, rewards: [1, 0, 0, 1], groupIds: [0, 0, 0, 1] },
      tokenizer,
      { maxSeqLen: 48, vocabSize: V },
      { placement: 'after-query', contextBudget: 20 },
    );
    const t2 = tight.batch.promptLen + tight.batch.completionLen;
    expect(
      tokenizer.decode(Array.from(tight.batch.tokens.subarray(0, t2)), { keepSpecial: true }).replace(/<pad>/g, ''),
    ).toBe('<bos>12+34=<eos>\\boxed{45<eos>\\boxed{4<eos>\\boxed{46}<eos>');
    expect(tight.traces[0]).toEqual([
      { row: 1, tokens: 3 },
      { row: 2, tokens: 2 },
    ]);
  });

  it("placement 'before-query', the default, puts the same inserted tokens in front of the plain prompt", () => {
    const q = '12+34=';
    const comps = ['\\boxed{46}', '\\boxed{45}', '\\boxed{4', '\\boxed{3}'];
    const prompts = [q, q, q, '1+2='].map((s) => encodePrompt(tokenizer, s));
    const completions = comps.map((s, i) => (i === 2 ? tokenizer.encode(s) : encodeCompletion(tokenizer, s)));
    const plain = packSequences(prompts, completions, tokenizer.pad);
    const input = { ...plain, rewards: [1, 0, 0, 1], groupIds: [0, 0, 0, 1] };
    const cfg = { maxSeqLen: 48, vocabSize: V };
    const after = conditionBatch(input, tokenizer, cfg, { placement: 'after-query' });
    const before = conditionBatch(input, tokenizer, cfg);
    expect(Array.from(before.batch.tokens)).toEqual(
      Array.from(conditionBatch(input, tokenizer, cfg, { placement: 'before-query' }).batch.tokens),
    );
    // One default: the trainer's is BICC's own.
    expect([BICC_DEFAULTS.placement, TRAIN_DEFAULTS.biccPlacement]).toEqual(['before-query', 'before-query']);
    const t = before.batch.promptLen + before.batch.completionLen;
    const row = (r: number): string =>
      tokenizer
        .decode(Array.from(before.batch.tokens.subarray(r * t, (r + 1) * t)), { keepSpecial: true })
        .replace(/<pad>/g, '');
    // The completion follows the query, as when sampling; the traces and separators are those of 'after-query'.
    expect(row(0)).toBe('<eos>\\boxed{45}<eos>\\boxed{4<eos><bos>12+34=\\boxed{46}<eos>');
    expect(row(1)).toBe('<eos>\\boxed{46}<eos><bos>12+34=\\boxed{45}<eos>');
    expect(row(3)).toBe('<bos>1+2=\\boxed{3}<eos>');
    expect(before.conditioned).toEqual(after.conditioned);
    expect(before.insertedTokens).toEqual(after.insertedTokens);
    expect(before.traces).toEqual(after.traces);
    expect(before.batch.completionMask).toEqual(after.batch.completionMask);
    // RoPE positions of the scored tokens: |prompt'| + j, as with 'after-query' (same length, other order).
    const pa = positionsAndBias(after.batch, -1e9).positions;
    const pb = positionsAndBias(before.batch, -1e9).positions;
    expect(Array.from(pb)).toEqual(Array.from(pa));
    expect(E.isLeft(parseBiccOptions({ placement: 'middle' }))).toBe(true);
  });

  it('shares a budget as round-robin dealing would', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 12 }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 0, max: 80 }),
        (lens, total) => {
          const keep = lens.map(() => 0);
          let left = total;
          for (let progress = true; progress && left > 0; ) {
            progress = false;
            lens.forEach((l, i) => {
              if (left > 0 && keep[i]! < l) {
                keep[i]!++;
                left--;
                progress = true;
              }
            });
          }
          expect(shareBudget(lens, total)).toEqual(keep);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('rejects bad options and input with a BiccError naming the field', () => {
    const field = (input: unknown): string => {
      const r = parseBiccOptions(input);
      return E.isLeft(r) ? r.left.field : 'ok';
    };
    expect(field({})).toBe('ok');
    expect(field({ context_share: 0.3, context_budget: 40, separator: [2, 2] })).toBe('ok');
    for (const v of [0, 1, -0.1, 1.5, Number.NaN, '0.4']) expect(field({ contextShare: v })).toBe('contextShare');
    for (const v of [0, 2.5, -3]) expect(field({ contextBudget: v })).toBe('contextBudget');
    for (const v of [[], [1.5], [-1], 'x']) expect(field({ separator: v })).toBe('separator');
    expect(field({ threshold: Number.POSITIVE_INFINITY })).toBe('threshold');
    expect(field({ contextShar: 0.4 })).toBe('contextShar');
    expect(field(null)).toBe('(options)');

    const plain = packSequences(
      [encodePrompt(tokenizer, '1+2=')],
      [encodeCompletion(tokenizer, '\\boxed{3}')],
      tokenizer.pad,
    );
    const input = { ...plain, rewards: [1], groupIds: [0] };
    const cfg = { maxSeqLen: 32, vocabSize: V };
    const thrown = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        if (e instanceof BiccError) return e.field;
        throw e;
      }
      return 'ok';
    };
    expect(thrown(() => conditionBatch(input, tokenizer, cfg))).toBe('ok');
    expect(thrown(() => conditionBatch(input, tokenizer, cfg, { contextBudget: 33 }))).toBe('contextBudget');
    expect(thrown(() => conditionBatch(input, tokenizer, cfg, { separator: [tokenizer.pad] }))).toBe('separator');
    expect(thrown(() => conditionBatch(input, tokenizer, cfg, { separator: [V] }))).toBe('separator');
    expect(thrown(() => conditionBatch(input, tokenizer, { ...cfg, maxSeqLen: 8 }))).toBe('batch');
    expect(thrown(() => conditionBatch({ ...input, rewards: [] }, tokenizer, cfg))).toBe('rewards');
    expect(thrown(() => conditionBatch({ ...input, rewards: [Number.NaN] }, tokenizer, cfg))).toBe('rewards[0]');
    expect(thrown(() => conditionBatch({ ...input, groupIds: [0, 1] }, tokenizer, cfg))).toBe('groupIds');
  });
});
