import { it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import {
  broadcastPairArb,
  compareGrad,
  describeGpu,
  intsFor,
  RUNS,
  shapeArb,
  valuesFor,
  weights,
  expectClose,
  cpu,
  type Arg,
  type Tol,
} from './helpers.js';

/**
 * Every op's vector-Jacobian rule on the WebGPU backend against the CPU backend: valueAndGrad of
 * sum(op(inputs) * w) for a non-uniform cotangent w, on fast-check shapes; then the whole valueAndGrad of a
 * small MLP and of the attention composite.
 * Tolerance: the backward pass chains the forward kernels compared elsewhere (each within a few f32 ULP), and
 * the value is an f32 sum over the output, so atol = 2e-6 per output element and rtol 2e-5 (elementwise),
 * scaled where sums or matmuls over K enter.
 */
const tolFor = (n: number, scale = 1): Tol => ({ atol: 2e-6 * Math.max(1, n) * scale, rtol: 2e-5 * scale });
const size = (s: readonly number[]): number => s.reduce((a, b) => a * b, 1);

const RUNS_G = { numRuns: 10 };

describeGpu('webgpu vjp: unary', (gpu) => {
  const any = shapeArb(0, 3, 6).chain((s) => valuesFor(s, -3, 3));
  const pos = shapeArb(0, 3, 6).chain((s) => valuesFor(s, 0.2, 3));
  const cases: [string, fc.Arbitrary<Arg>, (x: T.Tensor) => T.Tensor][] = [
    ['neg', any, T.neg],
    ['exp', any, T.exp],
    ['log', pos, T.log],
    ['sqrt', pos, T.sqrt],
    ['rsqrt', pos, T.rsqrt],
    ['tanh', any, T.tanh],
    ['sigmoid', any, T.sigmoid],
    ['gelu', any, T.gelu],
    ['silu', any, T.silu],
    ['abs', any, T.abs],
    ['square', any, T.square],
    ['reciprocal', pos, T.reciprocal],
    ['relu', any, T.relu],
    ['sign', any, T.sign],
    ['clamp', any, (x) => T.clamp(x, -1, 1.5)],
  ];
  for (const [name, arb, f] of cases) {
    it(name, async () => {
      await fc.assert(
        fc.asyncProperty(arb, (a) => compareGrad(name, [a], ([x]) => f(x!), tolFor(size(a.shape), 4), gpu)),
        RUNS_G,
      );
    });
  }
});

describeGpu('webgpu vjp: binary with broadcasting (gradients summed back over broadcast axes)', (gpu) => {
  const pair = (lo2: number, hi2: number, lo1 = -2, hi1 = 2): fc.Arbitrary<[Arg, Arg]> =>
    broadcastPairArb(3, 5).chain(([s1, s2]) => fc.tuple(valuesFor(s1, lo1, hi1), valuesFor(s2, lo2, hi2)));
  const cases: [string, fc.Arbitrary<[Arg, Arg]>, (a: T.Tensor, b: T.Tensor) => T.Tensor][] = [
    ['add', pair(-2, 2), T.add],
    ['sub', pair(-2, 2), T.sub],
    ['mul', pair(-2, 2), T.mul],
    ['div', pair(0.5, 2), T.div],
    ['pow', pair(-2, 2, 0.3, 2), T.pow],
    ['maximum', pair(-2, 2), T.maximum],
    ['minimum', pair(-2, 2), T.minimum],
    ['where', pair(-2, 2), (a, b) => T.where(T.greater(a, 0), a, b)],
  ];
  for (const [name, arb, f] of cases) {
    it(name, async () => {
      await fc.assert(
        fc.asyncProperty(arb, ([a, b]) =>
          compareGrad(name, [a, b], ([x, y]) => f(x!, y!), tolFor(size(a.shape) * size(b.shape), 4), gpu),
        ),
        RUNS_G,
      );
    });
  }
});

describeGpu('webgpu vjp: reductions, movement, matmul, indexing, rows', (gpu) => {
  const withAxes = shapeArb(1, 4, 5).chain((s) => fc.tuple(valuesFor(s), fc.subarray([...s.keys()], { minLength: 1 })));
  for (const [name, f] of [
    ['sum', T.sum],
    ['mean', T.mean],
    ['max', T.max],
    ['min', T.min],
    ['logsumexp', T.logsumexp],
    ['variance', T.variance],
  ] as const) {
    it(name, async () => {
      await fc.assert(
        fc.asyncProperty(withAxes, ([a, axes]) =>
          compareGrad(name, [a], ([x]) => f(x!, axes), tolFor(size(a.shape), 4), gpu),
        ),
        RUNS_G,
      );
    });
  }

  it('expand, reshape, permute, slice, pad, concat, split', async () => {
    const arb = shapeArb(2, 3, 5).chain((s) => valuesFor(s));
    await fc.assert(
      fc.asyncProperty(arb, (a) =>
        compareGrad(
          'movement',
          [a],
          ([x]) => {
            const r = x!.rank;
            const e = T.expand(T.expandDims(x!, 0), [2, ...x!.shape]);
            const p = T.permute(e, [...Array(r + 1).keys()].reverse());
            const s = T.slice(
              p,
              new Array(r + 1).fill(0),
              p.shape.map((d) => Math.max(1, d - 1)),
            );
            const padded = T.pad(
              s,
              new Array(r + 1).fill(1),
              s.shape.map((d) => d + 2),
            );
            const [h1, h2] = T.split(padded, [1, padded.shape[0]! - 1], 0);
            return T.reshape(T.concat([h2!, h1!, h1!], 0), [-1]);
          },
          tolFor(size(a.shape) * 4),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('matmul with transposes and broadcast batches', async () => {
    const d = fc.integer({ min: 1, max: 20 });
    const arb = fc
      .record({ m: d, n: d, k: d, tA: fc.boolean(), tB: fc.boolean(), batch: broadcastPairArb(2, 3) })
      .chain((c) =>
        fc.tuple(
          fc.constant(c),
          valuesFor([...c.batch[0], ...(c.tA ? [c.k, c.m] : [c.m, c.k])]),
          valuesFor([...c.batch[1], ...(c.tB ? [c.n, c.k] : [c.k, c.n])]),
        ),
      );
    await fc.assert(
      fc.asyncProperty(arb, ([c, a, b]) =>
        compareGrad(
          'matmul',
          [a, b],
          ([x, y]) => T.matmul(x!, y!, { transA: c.tA, transB: c.tB }),
          tolFor(c.m * c.n * 4, c.k),
          gpu,
        ),
      ),
      RUNS_G,
    );
    // One input in three products (q, k and v of one layer): the later products' rules fold dA in.
    await fc.assert(
      fc.asyncProperty(arb, ([c, a, b]) =>
        compareGrad(
          'matmul x3',
          [a, b, b, b],
          ([x, p, q, r]) => {
            const o = { transA: c.tA, transB: c.tB };
            return T.add(T.add(T.matmul(x!, p!, o), T.mul(T.matmul(x!, q!, o), 0.5)), T.mul(T.matmul(x!, r!, o), -2));
          },
          tolFor(c.m * c.n * 16, c.k),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('gather, scatterAdd, takeAlongAxis, putAlongAxisAdd (gradient with respect to the values)', async () => {
    const arb = fc
      .tuple(fc.integer({ min: 2, max: 6 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 5 }))
      .chain(([v, d, n]) =>
        fc.tuple(valuesFor([v, d]), intsFor([n], 0, v - 1), intsFor([v, 2], 0, d - 1), valuesFor([n, d])),
      );
    await fc.assert(
      fc.asyncProperty(arb, ([x, idx, idx2, u]) =>
        compareGrad(
          'indexing',
          [x, idx, idx2, u],
          ([xt, it1, it2, ut]) => {
            const g = T.gather(xt!, it1!, 0);
            const s = T.scatterAdd(ut!, it1!, 0, xt!.shape);
            const t = T.takeAlongAxis(xt!, it2!, 1);
            const p = T.putAlongAxisAdd(t, it2!, 1, xt!.shape);
            return T.concat([T.reshape(g, [-1]), T.reshape(s, [-1]), T.reshape(t, [-1]), T.reshape(p, [-1])], 0);
          },
          tolFor(40),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('softmax and logSoftmax along a random axis', async () => {
    const arb = shapeArb(1, 3, 6).chain((s) =>
      fc.tuple(valuesFor(s, -4, 4), fc.integer({ min: 0, max: s.length - 1 })),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([a, axis]) =>
        compareGrad(
          'softmax',
          [a],
          ([x]) => T.add(T.softmax(x!, axis), T.logSoftmax(x!, axis)),
          tolFor(size(a.shape), 4),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('rmsNorm and layerNorm (gradients for x, weight and bias)', async () => {
    const arb = fc
      .tuple(
        fc.integer({ min: 1, max: 5 }),
        fc.oneof(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 60, max: 130 })),
      )
      .chain(([r, d]) => fc.tuple(valuesFor([r, d], -3, 3), valuesFor([d], 0.5, 2), valuesFor([d], -1, 1)));
    await fc.assert(
      fc.asyncProperty(arb, ([x, w, b]) =>
        compareGrad(
          'norms',
          [x, w, b],
          ([xt, wt, bt]) => T.add(T.rmsNorm(xt!, wt!, 1e-5), T.layerNorm(xt!, wt!, bt!, 1e-5)),
          tolFor(size(x.shape), 10),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('crossEntropy and tokenLogProbs', async () => {
    const arb = fc
      .tuple(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 2, max: 30 }))
      .chain(([b, v]) => fc.tuple(valuesFor([b, v], -4, 4), intsFor([b], 0, v - 1)));
    await fc.assert(
      fc.asyncProperty(arb, ([l, t]) =>
        compareGrad(
          'crossEntropy',
          [l, t],
          ([lt, tt]) => T.add(T.crossEntropy(lt!, tt!, 'sum'), T.sum(T.tokenLogProbs(lt!, tt!))),
          tolFor(l.values.length, 4),
          gpu,
        ),
      ),
      RUNS_G,
    );
  });

  it('causalAttention (q, k, v [B, T, H, D]; the fused kernel, more cases in fused.spec.ts)', async () => {
    const arb = fc
      .tuple(
        fc.integer({ min: 1, max: 2 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 8 }),
      )
      .chain(([b, h, t, d]) => fc.tuple(valuesFor([b, t, h, d]), valuesFor([b, t, h, d]), valuesFor([b, t, h, d])));
    await fc.assert(
      fc.asyncProperty(arb, ([q, k, v]) =>
        compareGrad(
          'attention',
          [q, k, v],
          ([qt, kt, vt]) => T.causalAttention(qt!, kt!, vt!),
          tolFor(q.values.length, 8),
          gpu,
        ),
      ),
      RUNS,
    );
  });
});

interface Mlp extends Record<string, T.Tensor> {
  w1: T.Tensor;
  b1: T.Tensor;
  w2: T.Tensor;
  b2: T.Tensor;
}

describeGpu('webgpu: whole valueAndGrad of composites agrees with the CPU backend', (gpu) => {
  it('a small MLP with a cross-entropy loss (atol 1e-5, rtol 1e-4: matmuls over K <= 24, sums over the batch)', async () => {
    const rng = new T.Rng(7);
    const shapes = { w1: [12, 24], b1: [24], w2: [24, 7], b2: [7] } as const;
    const init = Object.fromEntries(
      Object.entries(shapes).map(([k, s]) => [k, Array.from(T.randn([...s], rng, { std: 0.3 }).dataSync())]),
    );
    const x = Array.from(T.randn([9, 12], rng).dataSync());
    const y = [0, 1, 2, 3, 4, 5, 6, 0, 1];
    const run = async (backend: T.Backend): Promise<T.TypedArray[]> => {
      const params = Object.fromEntries(
        Object.entries(shapes).map(([k, s]) => [k, T.tensor(init[k]!, [...s], { backend })]),
      ) as Mlp;
      const xt = T.tensor(x, [9, 12], { backend });
      const yt = T.tensor(y, [9], { dtype: 'i32', backend });
      const loss = (p: Mlp): T.Tensor =>
        T.crossEntropy(T.add(T.matmul(T.gelu(T.add(T.matmul(xt, p.w1), p.b1)), p.w2), p.b2), yt);
      const [value, grads] = T.valueAndGrad(loss)(params);
      const out = await Promise.all([value, grads.w1, grads.b1, grads.w2, grads.b2].map((t) => t.data()));
      T.dispose([value, grads, params, xt, yt]);
      return out;
    };
    const [want, got] = [await run(cpu), await run(gpu)];
    want.forEach((w, i) => expectClose(`mlp ${i}`, got[i]!, w, { atol: 1e-5, rtol: 1e-4 }));
  });

  it('multi-head attention block with RMSNorm (atol 1e-5, rtol 1e-4)', async () => {
    const [b, h, t, d] = [2, 2, 5, 4];
    const dm = h * d;
    const rng = new T.Rng(11);
    const vals = (s: number[]): number[] => Array.from(T.randn(s, rng, { std: 0.5 }).dataSync());
    const init = {
      wq: vals([dm, dm]),
      wk: vals([dm, dm]),
      wv: vals([dm, dm]),
      wo: vals([dm, dm]),
      g: vals([dm]).map((v) => 1 + 0.1 * v),
    };
    const xv = vals([b, t, dm]);
    const w = weights(b * t * dm, 3);
    const run = async (backend: T.Backend): Promise<T.TypedArray[]> => {
      const p = {
        wq: T.tensor(init.wq, [dm, dm], { backend }),
        wk: T.tensor(init.wk, [dm, dm], { backend }),
        wv: T.tensor(init.wv, [dm, dm], { backend }),
        wo: T.tensor(init.wo, [dm, dm], { backend }),
        g: T.tensor(init.g, [dm], { backend }),
      };
      const x = T.tensor(xv, [b, t, dm], { backend });
      const wt = T.tensor(w, [b, t, dm], { backend });
      const heads = (z: T.Tensor): T.Tensor => T.reshape(z, [b, t, h, d]);
      const f = (q: typeof p): T.Tensor => {
        const n = T.rmsNorm(x, q.g);
        const att = T.causalAttention(heads(T.matmul(n, q.wq)), heads(T.matmul(n, q.wk)), heads(T.matmul(n, q.wv)));
        const merged = T.reshape(att, [b, t, dm]);
        return T.sum(T.mul(T.add(x, T.matmul(merged, q.wo)), wt));
      };
      const [value, grads] = T.valueAndGrad(f)(p);
      const out = await Promise.all([value, grads.wq, grads.wk, grads.wv, grads.wo, grads.g].map((z) => z.data()));
      T.dispose([value, grads, p, x, wt]);
      return out;
    };
    const [want, got] = [await run(cpu), await run(gpu)];
    want.forEach((wv, i) => expectClose(`attention block ${i}`, got[i]!, wv, { atol: 1e-5, rtol: 1e-4 }));
  });
});
