/**
 * Fixtures for the BICC specs: a tokenizer and tiny models, plain batches built from token lists, and an
 * independent statement of the documented layout (round-robin dealing of the token budget, written without the
 * implementation's helpers).
 */
import * as E from 'fp-ts/lib/Either.js';
import { Rng } from '../../src/core/rng.js';
import { treeLeaves } from '../../src/core/pytree.js';
import type { Tensor } from '../../src/core/tensor.js';
import { initParams, smallConfig, type TransformerConfig, type TransformerParams } from '../../src/nn/transformer.js';
import { makeObjective, type BoundObjective } from '../../src/objectives/index.js';
import { additionTask, countdownTask, multiplicationTask, tokenizerFor } from '../../src/tasks/index.js';

export const tokenizer = tokenizerFor(additionTask(), multiplicationTask(), countdownTask());

export function tinyConfig(overrides: Partial<TransformerConfig> = {}): TransformerConfig {
  return smallConfig(tokenizer.vocabSize, {
    dModel: 16,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dFf: 24,
    maxSeqLen: 64,
    ...overrides,
  });
}

/** A random model with a large init std, so next-token distributions are far from uniform and gradients large. */
export const peakedParams = (
  config: TransformerConfig,
  seed: number,
  dtype: 'f32' | 'f64' = 'f64',
): TransformerParams => initParams(config, new Rng(seed), { dtype, std: 0.5 });

export function objective(name: string, cfg: Record<string, unknown> = {}): BoundObjective {
  const o = makeObjective(name, cfg);
  if (E.isLeft(o)) throw o.left;
  return o.right;
}

/** Every gradient leaf's values, in pytree order. */
export const gradValues = (grads: unknown): number[][] =>
  treeLeaves(grads).map((t: Tensor) => Array.from(t.dataSync()));

/** One plain row as its test author wrote it: prompt ids ([BOS, query]) and completion ids (EOS when finished). */
export interface PlainRow {
  readonly prompt: readonly number[];
  readonly completion: readonly number[];
  readonly reward: number;
  readonly group: number;
}

export interface LayoutParams {
  readonly share: number;
  readonly budget: number;
  readonly sep: readonly number[];
  readonly threshold: number;
  /** The batch's completion width. */
  readonly c: number;
  readonly eos: number;
}

/**
 * The documented conditioned prompt of row r, built from the rows' own token lists: [prompt, (S, trace_i)..., S]
 * with the opposite-class rows of the group in row order; k traces while (k + 1)|S| + k fits the room; the
 * remaining room dealt one token at a time, round-robin, to traces with tokens left. Null for a plain row.
 */
export function expectedPrompt(
  rows: readonly PlainRow[],
  r: number,
  lp: LayoutParams,
): { prompt: number[]; sources: { row: number; tokens: number }[] } | null {
  const me = rows[r]!;
  const mine = me.reward > lp.threshold;
  const opposite: number[] = [];
  rows.forEach((o, i) => {
    if (o.group === me.group && o.reward > lp.threshold !== mine) opposite.push(i);
  });
  const room = Math.min(Math.floor(lp.share * lp.budget), lp.budget - me.prompt.length - lp.c);
  const s = lp.sep.length;
  let k = opposite.length;
  while (k > 0 && (k + 1) * s + k > room) k--;
  if (k === 0) return null;
  const content = opposite.slice(0, k).map((i) => {
    const co = rows[i]!.completion;
    return co.length > 0 && co[co.length - 1] === lp.eos ? co.slice(0, -1) : [...co];
  });
  const keep = content.map(() => 0);
  let left = room - (k + 1) * s;
  for (let progress = true; progress && left > 0; ) {
    progress = false;
    for (let i = 0; i < k && left > 0; i++) {
      if (keep[i]! < content[i]!.length) {
        keep[i]!++;
        left--;
        progress = true;
      }
    }
  }
  const prompt = [...me.prompt];
  content.forEach((ct, i) => prompt.push(...lp.sep, ...ct.slice(0, keep[i])));
  prompt.push(...lp.sep);
  return { prompt, sources: opposite.slice(0, k).map((row, i) => ({ row, tokens: keep[i]! })) };
}
