import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { treeLeaves, treeMap } from '../../src/core/pytree.js';
import { tidy } from '../../src/core/scope.js';
import type { Tensor } from '../../src/core/tensor.js';
import { stopGradient, valueAndGrad } from '../../src/core/transforms.js';
import { tensor } from '../../src/ops/creation.js';
import { where } from '../../src/ops/elementwise.js';
import { tokenLogProbs } from '../../src/ops/loss.js';
import { concat, slice } from '../../src/ops/movement.js';
import { hiddenStates, lmHead, PAD_BIAS, type TransformerParams } from '../../src/nn/transformer.js';
import {
  encodeCompletion,
  encodePrompt,
  packSequences,
  positionsAndBias,
  selectRowValues,
  selectRows,
  seqLen,
  type SequenceBatch,
} from '../../src/rl/batch.js';
import { biccLogProbs, conditionBatch } from '../../src/rl/bicc.js';
import { scoreLogProbs } from '../../src/rl/score.js';
import { objective, peakedParams, tinyConfig, tokenizer } from './helpers.js';

/**
 * "Gradients flow through attention into the inserted traces." The LM head is tied to the embeddings, so every
 * embedding row gets gradient through the softmax whatever the context: a nonzero gradient alone proves
 * nothing. What separates "the context is attended to and differentiated" from "the context is detached" is
 * the input path. We take a token v ('(') that occurs only inside the negatives' traces and score a minibatch
 * of the positive rows, where v is never a query or completion token: its embedding row then reaches the loss
 * as an input only through the inserted context. A detached context leaves exactly the head path, which we
 * compute by detaching the input embeddings (`headOnly`); the BICC gradient must differ from it and agree
 * with central finite differences of the loss (which no implementation can detach).
 */
const config = tinyConfig();
const params = peakedParams(config, 5);
const V = tokenizer.encode('(')[0]!;
const q = encodePrompt(tokenizer, '12+34=');
const outs = ['\\boxed{46}', '\\boxed{(4-6)}', '\\boxed{46}', '\\boxed{(46}', '\\boxed{4+6}'];
const rewards = [1, 0, 1, 0, 0];
const plain = packSequences(
  outs.map(() => q),
  outs.map((o) => encodeCompletion(tokenizer, o)),
  tokenizer.pad,
);
// 'after-query': the inserted context ends the prompt block, where the probe checks below look for it.
const cond = conditionBatch({ ...plain, rewards, groupIds: outs.map(() => 0) }, tokenizer, config, {
  placement: 'after-query',
});
const posRows = [0, 2];
const c = plain.completionLen;
// pi_old on the plain context, as in training. Wide clip range: every token keeps its gradient (no clipping kink).
const old = tidy(() => scoreLogProbs(params, config, plain)).dataSync() as Float64Array;
const grpo = objective('grpo', { epsilon: 0.99, epsilonHigh: 1e3 });
const advantages = [1.2247, 0.8165];

/** scoreLogProbs with the input embeddings detached (the LM head keeps its gradient). */
function headOnly(p: TransformerParams, batch: SequenceBatch): Tensor {
  const b = batch.batchSize;
  const t = seqLen(batch);
  const { positions, keyBias } = positionsAndBias(batch, PAD_BIAS);
  const inputs = { ...p, embed: { weight: stopGradient(p.embed.weight) } };
  const { hidden } = hiddenStates(inputs, config, tensor(batch.tokens, [b, t], { dtype: 'i32' }), {
    positions: tensor(positions, [b, t], { dtype: 'i32' }),
    keyBias: tensor(keyBias, [b, t], { dtype: 'f64' }),
  });
  const targets = new Int32Array(b * c);
  for (let r = 0; r < b; r++) targets.set(batch.tokens.subarray(r * t + batch.promptLen, (r + 1) * t), r * c);
  const lp = tokenLogProbs(
    lmHead(p, slice(hidden, [0, batch.promptLen - 1, 0], [b, c, config.dModel])),
    tensor(targets, [b, c], { dtype: 'i32' }),
  );
  return where(tensor(batch.completionMask, [b, c], { dtype: 'f64' }), lp, 0);
}

/**
 * A wrong BICC, as a control: the prompt part (query and inserted context) is run first with detached
 * parameters into a KV cache, the completion block then attends to that cache. Same values, no gradient
 * through the context (what "conditioning on a precomputed prefix" would do).
 */
function detachedPrefix(p: TransformerParams, batch: SequenceBatch): Tensor {
  const b = batch.batchSize;
  const t = seqLen(batch);
  const pl = batch.promptLen;
  const { positions, keyBias } = positionsAndBias(batch, PAD_BIAS);
  const cols = <A extends Int32Array | Float64Array>(xs: A, from: number, to: number, make: (n: number) => A): A => {
    const out = make(b * (to - from));
    for (let r = 0; r < b; r++) out.set(xs.subarray(r * t + from, r * t + to), r * (to - from));
    return out;
  };
  const part = (from: number, to: number) => ({
    tokens: tensor(
      cols(Int32Array.from(batch.tokens), from, to, (n) => new Int32Array(n)),
      [b, to - from],
      { dtype: 'i32' },
    ),
    positions: tensor(
      cols(positions, from, to, (n) => new Int32Array(n)),
      [b, to - from],
      { dtype: 'i32' },
    ),
    keyBias: tensor(
      cols(keyBias, from, to, (n) => new Float64Array(n)),
      [b, to - from],
      { dtype: 'f64' },
    ),
  });
  const a = part(0, pl);
  const first = hiddenStates(treeMap(p, stopGradient), config, a.tokens, {
    positions: a.positions,
    keyBias: a.keyBias,
    cache: null,
  });
  const z = part(pl, t);
  const second = hiddenStates(p, config, z.tokens, { positions: z.positions, keyBias: z.keyBias, cache: first.cache });
  const h = concat(
    [
      slice(first.hidden, [0, pl - 1, 0], [b, 1, config.dModel]),
      slice(second.hidden, [0, 0, 0], [b, c - 1, config.dModel]),
    ],
    1,
  );
  const lp = tokenLogProbs(lmHead(p, h), z.tokens);
  return where(tensor(batch.completionMask, [b, c], { dtype: 'f64' }), lp, 0);
}

type Scorer = (p: TransformerParams, batch: SequenceBatch) => Tensor;
const lossOf =
  (score: Scorer, batch: SequenceBatch) =>
  (p: TransformerParams): Tensor => {
    const mini = selectRows(batch, posRows);
    const n = posRows.length;
    return grpo.loss({
      logProbs: score(p, mini),
      oldLogProbs: tensor(selectRowValues(Float32Array.from(old), c, posRows), [n, c], { dtype: 'f64' }),
      mask: tensor(mini.completionMask, [n, c], { dtype: 'f64' }),
      rewards: posRows.map((r) => rewards[r]!),
      groupIds: posRows.map(() => 0),
      advantages,
    }).loss;
  };
const bicc: Scorer = (p, batch) => biccLogProbs(p, config, batch);
const plainScore: Scorer = (p, batch) => scoreLogProbs(p, config, batch);

/** The gradient's embedding row v. */
const embedRow = (score: Scorer, batch: SequenceBatch): number[] =>
  tidy(() => {
    const [, g] = valueAndGrad(lossOf(score, batch))(params);
    return Array.from(g.embed.weight.dataSync().subarray(V * config.dModel, (V + 1) * config.dModel));
  });

/** Central difference of the BICC loss along `dir` (one array per parameter leaf). */
function directional(batch: SequenceBatch, dir: readonly Float64Array[], h = 1e-5): number {
  const at = (s: number): number =>
    tidy(() => {
      const moved = treeMap(params, (leaf, i) =>
        tensor(
          Float64Array.from(leaf.dataSync(), (x, j) => x + s * dir[i]![j]!),
          leaf.shape,
          { dtype: 'f64' },
        ),
      );
      return lossOf(bicc, batch)(moved).itemSync();
    });
  return (at(h) - at(-h)) / (2 * h);
}
const dot = (a: readonly number[], b: ArrayLike<number>): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const norm = (a: readonly number[]): number => Math.sqrt(dot(a, a));

describe('BICC gradient through the inserted context', () => {
  it('places the probe token only in the inserted context of the positive rows', () => {
    const t = seqLen(cond.batch);
    const p = cond.batch.promptLen;
    for (const r of posRows) {
      const row = Array.from(cond.batch.tokens.subarray(r * t, (r + 1) * t));
      const start = p - cond.insertedTokens[r]!;
      expect(cond.conditioned[r]).toBe(true);
      expect(row.slice(start, p)).toContain(V);
      expect(row.slice(0, start).concat(row.slice(p))).not.toContain(V);
    }
  });

  it('differs from the detached-context gradient on the probe row and matches finite differences', () => {
    const g = embedRow(bicc, cond.batch);
    const detached = embedRow(headOnly, cond.batch);
    // Without context (plain minibatch) the probe is no input anywhere: the two gradients coincide exactly.
    expect(embedRow(plainScore, plain)).toEqual(embedRow(headOnly, plain));
    const gap = norm(g.map((x, i) => x - detached[i]!));
    expect(gap).toBeGreaterThan(1e-2 * norm(g));
    const rng = new Rng(3);
    const leaves = treeLeaves(params);
    for (let trial = 0; trial < 3; trial++) {
      const row = Array.from({ length: config.dModel }, () => rng.normal());
      const dir = leaves.map((leaf, _i) => {
        const d = new Float64Array(leaf.size);
        if (leaf === params.embed.weight) d.set(row, V * config.dModel);
        return d;
      });
      const fd = directional(cond.batch, dir);
      expect(Math.abs(dot(row, g) - fd)).toBeLessThan(1e-7 + 1e-6 * Math.abs(fd));
      expect(Math.abs(dot(row, detached) - fd)).toBeGreaterThan(1e-3 * Math.abs(fd));
    }
  });

  it('would fail for a context run as a detached prefix (same values, head-only gradient on the probe row)', () => {
    const value = (score: Scorer): number => tidy(() => lossOf(score, cond.batch)(params).itemSync());
    expect(value(detachedPrefix)).toBeCloseTo(value(bicc), 12);
    const wrong = embedRow(detachedPrefix, cond.batch);
    expect(wrong.map((x, i) => Math.abs(x - embedRow(headOnly, cond.batch)[i]!)).every((d) => d < 1e-12)).toBe(true);
    const g = embedRow(bicc, cond.batch);
    expect(norm(g.map((x, i) => x - wrong[i]!))).toBeGreaterThan(1e-2 * norm(g));
  });

  it('matches finite differences along random directions in all parameters (attention reads the context)', () => {
    const leaves = treeLeaves(params);
    const grads = tidy(() =>
      treeLeaves(valueAndGrad(lossOf(bicc, cond.batch))(params)[1]).map((x) => Float64Array.from(x.dataSync())),
    );
    const rng = new Rng(4);
    for (let trial = 0; trial < 3; trial++) {
      const dir = leaves.map((leaf) => Float64Array.from({ length: leaf.size }, () => rng.normal()));
      const analytic = grads.reduce((s, g, i) => s + dot(Array.from(dir[i]!), g), 0);
      const fd = directional(cond.batch, dir);
      expect(Math.abs(analytic - fd)).toBeLessThan(1e-7 + 1e-6 * Math.abs(fd));
    }
  });
});
