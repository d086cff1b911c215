import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { frozenPair } from '../helpers/frozen.js';
import { reference } from '../helpers/compare.js';

/**
 * The policy with its matrices frozen in bf16 or f16 (norms f32) computes exactly what it computes with the same
 * rounded matrices held as f32, on the CPU and reference backends: the full forward (tied and untied heads, grouped
 * query heads, Qwen2 biases and Qwen3 head norms), the KV-cache path the sampler takes, and the gradients of a loss
 * with respect to the f32 norms (the matrices frozen: passed outside the differentiated argument).
 */
const cpu = new T.CpuBackend({ threads: 2, minParallelWork: 0 });
const bitsOf = (xs: ArrayLike<number>): number[] =>
  Array.from(new Uint32Array((xs instanceof Float32Array ? xs.slice() : Float32Array.from(xs)).buffer));

const CONFIGS: [string, T.TransformerConfig][] = [
  ['tied head, grouped-query heads', T.smallConfig(29, { dModel: 32, nHeads: 4, nKvHeads: 2, dFf: 72, nLayers: 2 })],
  [
    'untied head, Qwen2 biases, Qwen3 head norms',
    T.smallConfig(23, {
      dModel: 24,
      nHeads: 3,
      nKvHeads: 1,
      dFf: 40,
      nLayers: 1,
      tieEmbeddings: false,
      qkvBias: true,
      qkNorm: true,
    }),
  ],
];

describe.each([
  ['cpu', cpu],
  ['reference', reference],
] as const)('frozen half-precision matrices on %s', (_name, backend) => {
  for (const [what, config] of CONFIGS) {
    it.each(['bf16', 'f16'] as const)(
      `%s, ${what}: forward, cached decode and norm gradients are bit-identical`,
      (dtype) => {
        T.tidy(() => {
          const params = T.initParams(config, new T.Rng(5), { backend, std: 0.3 });
          const { half, wide } = frozenPair(params, dtype, backend);
          expect(half.embed.weight.dtype).toBe(dtype);
          expect(half.layers[0]!.attnNorm.dtype).toBe('f32');
          const tokens = T.tensor(new Int32Array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]), [2, 6], {
            dtype: 'i32',
            backend,
          });
          const logits = (p: T.TransformerParams): number[] => bitsOf(T.forward(p, config, tokens).dataSync());
          expect(logits(half)).toEqual(logits(wide));

          // Prefill 4 positions into a preallocated cache, then decode the last 2 one at a time (the sampler's path).
          const decode = (p: T.TransformerParams): number[] => {
            let cache = T.createKvCache(p, config, 2, 6);
            const out: number[] = [];
            for (const [from, to] of [
              [0, 4],
              [4, 5],
              [5, 6],
            ] as const) {
              const step = T.forwardWithCache(p, config, T.slice(tokens, [0, from], [2, to - from]), cache);
              cache = step.cache;
              out.push(...bitsOf(step.logits.dataSync()));
            }
            return out;
          };
          expect(decode(half)).toEqual(decode(wide));

          const split = (p: T.TransformerParams) => ({
            trainable: { final: p.finalNorm, norms: p.layers.map((l) => l.mlpNorm) },
            frozen: p,
          });
          const loss = (t: { final: T.Tensor; norms: T.Tensor[] }, frozen: T.TransformerParams): T.Tensor => {
            const p = {
              ...frozen,
              finalNorm: t.final,
              layers: frozen.layers.map((l, i) => ({ ...l, mlpNorm: t.norms[i]! })),
            };
            return T.sum(T.square(T.forward(p, config, tokens)));
          };
          const [hv, hg] = T.valueAndGrad(loss)(split(half).trainable, split(half).frozen);
          const [wv, wg] = T.valueAndGrad(loss)(split(wide).trainable, split(wide).frozen);
          expect(bitsOf(hv.dataSync())).toEqual(bitsOf(wv.dataSync()));
          for (const [g, h] of T.treeLeaves(hg).map((t, i) => [t, T.treeLeaves(wg)[i]!] as const))
            expect(bitsOf(g.dataSync())).toEqual(bitsOf(h.dataSync()));
        });
        if (backend === cpu) {
          expect(T.fallbackCounts(cpu).matmul).toBeUndefined();
          expect(T.fallbackCounts(cpu).gather).toBeUndefined();
        }
      },
    );
  }
});
