import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { expectTreeGradientsMatch } from '../helpers/gradcheck.js';
import { sftLoss } from '../../src/rl/sft.js';
import { encodeCompletion, encodePrompt, packSequences } from '../../src/rl/batch.js';
import { tokenizer, tinyConfig } from '../policy/helpers/fixtures.js';

/**
 * `checkpoint(f)` (jax.checkpoint): the same value and the same gradients as f, bit for bit, with only the watched
 * inputs differentiated; and gradient checkpointing in the transformer: gradients against finite differences (f64),
 * the forward within rounding of the plain one, and a training step's heap on the CPU backend well below the plain
 * step's.
 */
const reference = new T.ReferenceBackend();

describe('checkpoint', () => {
  it('gives f and its gradients bit for bit, and no gradient for an unwatched input', () => {
    const on = { backend: reference };
    const w = T.randn([5, 4], new T.Rng(1), on);
    const frozen = T.randn([4, 3], new T.Rng(2), on);
    const x = T.randn([6, 5], new T.Rng(3), on);
    const f = (a: { x: T.Tensor; w: T.Tensor; frozen: T.Tensor }): T.Tensor =>
      T.tanh(T.matmul(T.exp(T.matmul(a.x, a.w)), a.frozen));
    const loss = (p: { w: T.Tensor; x: T.Tensor }, fn: typeof f): T.Tensor =>
      T.sum(T.square(fn({ x: p.x, w: p.w, frozen })));
    let calls = 0;
    const counted = (a: Parameters<typeof f>[0]): T.Tensor => {
      calls++;
      return f(a);
    };
    const [v1, g1] = T.valueAndGrad((p: { w: T.Tensor; x: T.Tensor }) => loss(p, f))({ w, x });
    const [v2, g2] = T.valueAndGrad((p: { w: T.Tensor; x: T.Tensor }) => loss(p, T.checkpoint(counted)))({ w, x });
    // One forward, one recomputation in the backward.
    expect(calls).toBe(2);
    expect(v2.dataSync()).toEqual(v1.dataSync());
    expect(g2.w.dataSync()).toEqual(g1.w.dataSync());
    expect(g2.x.dataSync()).toEqual(g1.x.dataSync());
  });

  it('keeps no intermediate of f alive between the forward and the backward', () => {
    const on = { backend: reference };
    const w = T.randn([64, 64], new T.Rng(1), on);
    const x = T.randn([32, 64], new T.Rng(3), on);
    const f = (a: { x: T.Tensor; w: T.Tensor }): T.Tensor => {
      let h = a.x;
      for (let i = 0; i < 8; i++) h = T.tanh(T.matmul(h, a.w));
      return h;
    };
    // Buffers alive when f has returned (the backward not yet run), counted from before the call.
    const liveAt = (fn: typeof f): number => {
      const before = reference.memory().buffers;
      let live = 0;
      const result = T.valueAndGrad((p: { w: T.Tensor }) => {
        const out = T.sum(fn({ x, w: p.w }));
        live = reference.memory().buffers - before;
        return out;
      })({ w });
      T.dispose(result);
      return live;
    };
    const plain = liveAt(f);
    const remat = liveAt(T.checkpoint(f));
    // 8 matmul and 8 tanh outputs and the sum; under checkpoint only f's output and the sum.
    expect(plain).toBe(17);
    expect(remat).toBe(2);
  });
});

describe('gradient checkpointing in the transformer', () => {
  const config = tinyConfig({ dModel: 8, nHeads: 2, nKvHeads: 1, dFf: 12, nLayers: 2 });
  const batch = packSequences(
    [encodePrompt(tokenizer, '12+34='), encodePrompt(tokenizer, '5*6=')],
    [encodeCompletion(tokenizer, '\\boxed{46}'), encodeCompletion(tokenizer, '\\boxed{3')],
    tokenizer.pad,
  );

  it('has gradients that match central finite differences (f64), with and without LoRA', () => {
    const on = { backend: reference, dtype: 'f64' as const };
    const base = T.initParams(config, new T.Rng(3), { ...on, std: 0.4 });
    const lora = T.initLora(config, { ...T.LORA_DEFAULTS, r: 2, targetModules: [...T.LORA_MODULES] }, new T.Rng(4), on);
    const withB = {
      ...lora,
      layers: lora.layers.map((l) =>
        Object.fromEntries(
          Object.entries(l).map(([m, p]) => [m, { a: p!.a, b: T.randn(p!.b.shape, new T.Rng(9), on) }]),
        ),
      ),
    };
    for (const params of [base, T.withLora(base, withB)]) {
      const trainable = T.trainableOf(params);
      const loss = (t: unknown): T.Tensor =>
        sftLoss(T.withTrainable(params, t as never), config, batch, { remat: true });
      const [value, grads] = T.valueAndGrad(loss)(trainable);
      const plain = sftLoss(params, config, batch);
      expect(Math.abs(value.itemSync() - plain.itemSync())).toBeLessThan(1e-12);
      expectTreeGradientsMatch(loss, trainable, grads);
    }
  });

  it("a training step's heap on the CPU backend is well below the plain step's", () => {
    const big = T.smallConfig(tokenizer.vocabSize, {
      dModel: 128,
      nLayers: 6,
      nHeads: 4,
      nKvHeads: 4,
      dFf: 384,
      maxSeqLen: 48,
    });
    const rows = Array.from({ length: 32 }, (_, i) => i);
    const seqs = packSequences(
      rows.map((i) => encodePrompt(tokenizer, `${10 + i}+${i}=`)),
      rows.map((i) => encodeCompletion(tokenizer, `\\boxed{${10 + 2 * i}}`)),
      tokenizer.pad,
    );
    const heap = (remat: boolean): number => {
      const cpu = new T.CpuBackend({ threads: 1 });
      const params = T.initParams(big, new T.Rng(1), { backend: cpu });
      const [v, g] = T.valueAndGrad((p: T.TransformerParams) => sftLoss(p, big, seqs, { remat }))(params);
      const bytes = cpu.poolStats().heapBytes;
      T.dispose([v, g, params]);
      cpu.dispose();
      return bytes;
    };
    const plain = heap(false);
    const remat = heap(true);
    expect(remat).toBeLessThan(0.6 * plain);
  });
});
