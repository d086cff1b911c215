import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { tidy } from '../../src/core/scope.js';
import type { Tensor } from '../../src/core/tensor.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { valueAndGrad } from '../../src/core/transforms.js';
import { tensor } from '../../src/ops/creation.js';
import { sum } from '../../src/ops/reduce.js';
import { DisposedTensorError, NotDifferentiableError, ShapeError } from '../../src/core/errors.js';
import { concat, reshape, slice } from '../../src/ops/movement.js';
import { applyRope, ropeAt, ropeTables } from '../../src/nn/rope.js';
import {
  forward,
  forwardWithCache,
  initParams,
  validateConfig,
  type TransformerParams,
} from '../../src/nn/transformer.js';
import { expectedShapes, toHfNames } from '../../src/io/hf.js';
import { createKvCache, disposeCache, type KvCache } from '../../src/nn/kv-cache.js';
import { encodeCompletion, encodePrompt, packSequences } from '../../src/rl/batch.js';
import { scoreLogProbs } from '../../src/rl/score.js';
import { sftLoss } from '../../src/rl/sft.js';
import { getDefaultBackend } from '../../src/core/runtime.js';
import { tokenizer, tinyConfig, peakedParams } from './helpers/fixtures.js';
import { expectTreeGradientsMatch } from '../helpers/gradcheck.js';

const ids = (rows: number[][]): Tensor =>
  tensor(new Int32Array(rows.flat()), [rows.length, rows[0]!.length], { dtype: 'i32' });

describe('transformer', () => {
  it('has gradients that match central finite differences (f64, GQA, padded batch)', () => {
    const config = tinyConfig({ dModel: 8, nHeads: 2, nKvHeads: 1, dFf: 12, nLayers: 2 });
    const params = initParams(config, new Rng(3), { dtype: 'f64', std: 0.4 });
    const batch = packSequences(
      [encodePrompt(tokenizer, '12+34='), encodePrompt(tokenizer, '5*6=')],
      [encodeCompletion(tokenizer, '\\boxed{46}'), encodeCompletion(tokenizer, '\\boxed{3')],
      tokenizer.pad,
    );
    const loss = (p: TransformerParams): Tensor => sftLoss(p, config, batch);
    const [, grads] = valueAndGrad(loss)(params);
    expectTreeGradientsMatch(loss, params, grads, { trials: 24 });
  });

  it('RoPE makes q.k depend only on the relative position, and preserves norms', () => {
    const backend = getDefaultBackend();
    const tables = ropeTables(8, 64, 10_000, 'f64', backend);
    const vec = fc.array(fc.double({ min: -2, max: 2, noNaN: true }), { minLength: 8, maxLength: 8 });
    fc.assert(
      fc.property(
        vec,
        vec,
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 0, max: 30 }),
        fc.integer({ min: 0, max: 33 }),
        (q, k, m, n, s) => {
          const rot = (v: number[], pos: number): Float64Array =>
            tidy(() => {
              const { cos, sin } = ropeAt(tables, tensor(new Int32Array([pos]), [1, 1], { dtype: 'i32' }));
              return applyRope(tensor(Float64Array.from(v), [1, 1, 1, 8], { dtype: 'f64' }), cos, sin);
            }).dataSync() as Float64Array;
          const dot = (a: Float64Array, b: Float64Array): number => a.reduce((acc, x, i) => acc + x * b[i]!, 0);
          const d1 = dot(rot(q, m), rot(k, n));
          const d2 = dot(rot(q, m + s), rot(k, n + s));
          expect(Math.abs(d1 - d2)).toBeLessThan(1e-9 * (1 + Math.abs(d1)));
          const qm = rot(q, m);
          expect(Math.abs(dot(qm, qm) - q.reduce((a, x) => a + x * x, 0))).toBeLessThan(1e-9 * (1 + dot(qm, qm)));
        },
      ),
      { numRuns: 60 },
    );
  });

  it.each([
    ['growing', false],
    ['preallocated (written in place)', true],
  ])('gives the same logits, exactly, when a sequence is fed in chunks through the KV cache, %s', (_, prealloc) => {
    const config = tinyConfig();
    const params = peakedParams(config, 5);
    const rows = [
      [1, 5, 9, 3, 12, 7, 4, 20],
      [1, 8, 8, 2, 6, 15, 11, 3],
    ];
    const full = tidy(() => forward(params, config, ids(rows))).dataSync();
    const chunks = [3, 1, 2, 2];
    // Capacity 10 > the 8 positions fed: rows past the filled ones are never keys.
    let cache: KvCache | null = prealloc ? createKvCache(params, config, 2, 10) : null;
    let start = 0;
    const got: Tensor[] = [];
    for (const n of chunks) {
      const out = tidy(() => forwardWithCache(params, config, ids(rows.map((r) => r.slice(start, start + n))), cache));
      disposeCache(cache);
      cache = out.cache;
      got.push(out.logits);
      start += n;
    }
    disposeCache(cache);
    const cached = tidy(() => concat(got, 1)).dataSync();
    expect(Array.from(cached)).toEqual(Array.from(full));
  });

  it('a preallocated cache: spent after a forward, bounded by its capacity, not differentiable', () => {
    const config = tinyConfig();
    const params = peakedParams(config, 5);
    const first = createKvCache(params, config, 2, 4);
    const out = tidy(() =>
      forwardWithCache(
        params,
        config,
        ids([
          [1, 5, 9],
          [1, 8, 8],
        ]),
        first,
      ),
    );
    expect(() => tidy(() => forwardWithCache(params, config, ids([[3], [4]]), first))).toThrow(DisposedTensorError);
    expect(() =>
      tidy(() =>
        forwardWithCache(
          params,
          config,
          ids([
            [3, 4],
            [4, 5],
          ]),
          out.cache,
        ),
      ),
    ).toThrow(ShapeError);
    expect(() => tidy(() => forwardWithCache(params, config, ids([[3]]), out.cache))).toThrow(ShapeError);
    disposeCache(out.cache);
    out.logits.dispose();
    const loss = (p: typeof params): Tensor =>
      sum(
        forwardWithCache(
          p,
          config,
          ids([
            [1, 5],
            [1, 8],
          ]),
          createKvCache(p, config, 2, 4),
        ).logits,
      );
    expect(() => tidy(() => valueAndGrad(loss)(params))).toThrow(NotDifferentiableError);
  });

  it('scores a row identically (bit for bit) whatever left padding the batch gives it', () => {
    const config = tinyConfig();
    const params = peakedParams(config, 6);
    const prompt = encodePrompt(tokenizer, '7*8=');
    const completion = encodeCompletion(tokenizer, '\\boxed{56}');
    const alone = tidy(() =>
      scoreLogProbs(params, config, packSequences([prompt], [completion], tokenizer.pad)),
    ).dataSync();
    const batch = packSequences(
      [encodePrompt(tokenizer, '3,5,7:22='), prompt],
      [encodeCompletion(tokenizer, '\\boxed{3*5+7}'), completion],
      tokenizer.pad,
    );
    const padded = tidy(() => scoreLogProbs(params, config, batch)).dataSync();
    const c = batch.completionLen;
    expect(Array.from(padded.subarray(c, c + completion.length))).toEqual(
      Array.from(alone.subarray(0, completion.length)),
    );
  });

  it('implements grouped-query attention as Hugging Face repeat_kv does', () => {
    const gqa = tinyConfig({ nHeads: 4, nKvHeads: 2 });
    const mha = { ...gqa, nKvHeads: 4 };
    const p = peakedParams(gqa, 7);
    const dh = gqa.dModel / gqa.nHeads;
    // Query head h uses kv head floor(h / group): repeat each kv head's rows `group` times.
    const repeat = (w: Tensor): Tensor =>
      concat(
        [0, 0, 1, 1].map((j) => slice(w, [j * dh, 0], [dh, gqa.dModel])),
        0,
      );
    const pm: TransformerParams = { ...p, layers: p.layers.map((l) => ({ ...l, wk: repeat(l.wk), wv: repeat(l.wv) })) };
    const tokens = ids([[1, 4, 9, 16, 3, 8]]);
    const a = tidy(() => forward(p, gqa, tokens)).dataSync();
    const b = tidy(() => forward(pm, mha, tokens)).dataSync();
    expect(Array.from(a)).toEqual(Array.from(b));
  });

  it('initialises from a seed, with Hugging Face shapes', () => {
    const config = tinyConfig();
    const a = initParams(config, new Rng(1));
    const b = initParams(config, new Rng(1));
    const c = initParams(config, new Rng(2));
    expect(treeLeaves(a).map((t) => Array.from(t.dataSync()))).toEqual(
      treeLeaves(b).map((t) => Array.from(t.dataSync())),
    );
    expect(Array.from(a.embed.weight.dataSync())).not.toEqual(Array.from(c.embed.weight.dataSync()));
    const shapes = expectedShapes(config);
    for (const [name, t] of toHfNames(a)) expect(t.shape).toEqual(shapes.get(name));
    expect(toHfNames(a).size).toBe(shapes.size);
    const logits = tidy(() => forward(a, config, ids([[1, 2, 3]])));
    expect(logits.shape).toEqual([1, 3, config.vocabSize]);
    expect(tidy(() => reshape(logits, [-1])).size).toBe(3 * config.vocabSize);
  });

  it('rejects inconsistent configs and over-long inputs with typed errors', () => {
    expect(() => validateConfig(tinyConfig({ nHeads: 3 }))).toThrow(/multiple of nHeads/);
    expect(() => validateConfig(tinyConfig({ nKvHeads: 3 }))).toThrow(/multiple of nKvHeads/);
    expect(() => validateConfig(tinyConfig({ dModel: 12, nHeads: 4 }))).toThrow(/even/);
    const config = tinyConfig({ maxSeqLen: 4 });
    const params = initParams(config, new Rng(1));
    expect(() => forward(params, config, ids([[1, 2, 3, 4, 5]]))).toThrow(/maxSeqLen/);
  });
});
