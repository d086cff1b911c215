import { afterEach, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { Tensor } from '../../src/core/tensor.js';
import { kt } from '../../src/ops/op.js';
import { ROW_WORKGROUPS, setRowWorkgroupSize } from '../../src/backends/webgpu/kernels/rows.js';
import {
  compareForward,
  describeGpu,
  EXACT,
  intsFor,
  RUNS,
  shapeArb,
  valuesFor,
  weights,
  type Arg,
  type Tol,
} from './helpers.js';

/**
 * Row kernels and indexing against the CPU backend: softmax / log-softmax along any axis, RMSNorm and
 * LayerNorm forward and backward kernels, gather / scatterAdd / takeAlongAxis / putAlongAxisAdd (duplicate and
 * out-of-range indices), and the AdamW update. The row kernels (one workgroup per row) run at each workgroup
 * size the tuner may pick (kernels/rows.ts: 64, 128, 256), each forced in turn.
 */
const SOFTMAX: Tol = { atol: 1e-6, rtol: 4e-6 }; // exp, a sum of up to 700 terms in f32, a divide / log
const NORM: Tol = { atol: 2e-6, rtol: 4e-6 }; // f32 row sums (d <= 300) and a sqrt, vs float64 on the CPU
const NORM_GRAD: Tol = { atol: 1e-5, rtol: 1e-5 }; // dw sums over rows of products; dx has two row sums

/** Call a two- or three-output backward kernel directly (the op layer runs it inside vector-Jacobian rules). */
const wrap = (like: readonly Tensor[], storages: readonly T.Storage[]): Tensor[] =>
  storages.map((s, i) => Tensor.fromStorage(like[0]!.backend, s, like[i]!.shape, like[i]!.dtype));

describeGpu('webgpu softmax', (gpu) => {
  afterEach(() => setRowWorkgroupSize(null));
  const short = shapeArb(1, 4, 6).chain((s) =>
    fc.tuple(valuesFor(s, -6, 6), fc.integer({ min: 0, max: s.length - 1 })),
  );
  const long = fc
    .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 120, max: 700 }))
    .chain(([r, n]) => fc.tuple(valuesFor([r, n], -6, 6), fc.constant(1)));
  for (const [name, arb, wg] of [
    ['any axis', short, ROW_WORKGROUPS[0]],
    ...ROW_WORKGROUPS.map((wg) => ['long rows (tree)', long, wg] as const),
  ] as const) {
    it(`softmax and logSoftmax, ${name}, workgroups of ${wg} (atol 1e-6, rtol 4e-6: exp, an f32 sum, a divide or log)`, async () => {
      setRowWorkgroupSize(wg);
      await fc.assert(
        fc.asyncProperty(arb, ([a, axis]) =>
          compareForward('softmax', [a], ([x]) => [T.softmax(x!, axis), T.logSoftmax(x!, axis)], SOFTMAX, gpu),
        ),
        RUNS,
      );
    });
  }
  it('is stable for large logits', async () => {
    const a: Arg = { shape: [2, 3], values: [1000, 1001, 1002, -1000, -1e30, 0] };
    await compareForward('softmax', [a], ([x]) => [T.softmax(x!), T.logSoftmax(x!)], SOFTMAX, gpu);
  });
});

describeGpu('webgpu norms', (gpu) => {
  const arb = fc
    .tuple(shapeArb(0, 2, 5), fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 60, max: 300 })))
    .chain(([lead, d]) =>
      fc.tuple(
        valuesFor([...lead, d], -3, 3),
        valuesFor([d], 0.5, 2),
        valuesFor([d], -1, 1),
        valuesFor([...lead, d], -1, 1),
      ),
    );
  afterEach(() => setRowWorkgroupSize(null));
  it('rmsNorm and layerNorm forward (atol 2e-6, rtol 4e-6: f32 row sums)', async () => {
    await fc.assert(
      fc.asyncProperty(arb, ([x, w, b]) =>
        compareForward(
          'norms',
          [x, w, b],
          ([xt, wt, bt]) => [T.rmsNorm(xt!, wt!, 1e-5), T.layerNorm(xt!, wt!, bt!, 1e-5)],
          NORM,
          gpu,
        ),
      ),
      RUNS,
    );
  });
  const backward = ([xt, wt, gt]: T.Tensor[]): T.Tensor[] => {
    const be = T.kernelsFor(xt!.backend);
    const rms = be.rmsNormBackward(kt('t', xt!), kt('t', wt!), kt('t', gt!), 1e-5, null);
    // With a prior (here the cotangent itself, x's shape): dx + prior, the tape's add folded in.
    const [rmsPrior] = be.rmsNormBackward(kt('t', xt!), kt('t', wt!), kt('t', gt!), 1e-5, kt('t', gt!));
    const ln = be.layerNormBackward(kt('t', xt!), kt('t', wt!), kt('t', gt!), 1e-5);
    return [...wrap([xt!, wt!], rms), ...wrap([xt!], [rmsPrior!]), ...wrap([xt!, wt!, wt!], ln)];
  };
  it('rmsNormBackward and layerNormBackward kernels (atol, rtol 1e-5: sums over rows of products)', async () => {
    await fc.assert(
      fc.asyncProperty(arb, ([x, w, , dy]) => compareForward('norm backward', [x, w, dy], backward, NORM_GRAD, gpu)),
      RUNS,
    );
  });
  it("rmsNormBackward's weight gradient over many rows: chunks of 256 rows, a partial last chunk and column block", async () => {
    // 700 rows (three row chunks of column_sums.wgsl, the last one partial) of d 45 (two column blocks of 32).
    const [rows, d] = [700, 45];
    await compareForward(
      'rmsNormBackward (700 rows)',
      [
        { shape: [rows, d], values: weights(rows * d, 1).map((v) => Math.fround(3 * v)) },
        { shape: [d], values: weights(d, 2).map((v) => Math.fround(1.25 + 0.5 * v)) },
        { shape: [rows, d], values: weights(rows * d, 3) },
      ],
      ([xt, wt, gt]) =>
        wrap(
          [xt!, wt!],
          T.kernelsFor(xt!.backend).rmsNormBackward(kt('t', xt!), kt('t', wt!), kt('t', gt!), 1e-5, null),
        ),
      NORM_GRAD,
      gpu,
    );
  });
  // Each workgroup size the tuner may pick, on fixed rows (d from 1 to 300, under and over every size). Not the
  // random rows above: those include near-constant rows, where eps dominates the variance and f32's rounding of
  // the mean alone reaches LayerNorm's tolerance at any workgroup size (an occasional failure of the properties
  // above, seen at 64 threads as at 256 on the same input; not the workgroup's).
  const fixed = [1, 5, 64, 65, 200, 300].map((d, i): Arg[] => {
    const rows = 1 + (i % 3);
    return [
      { shape: [rows, d], values: weights(rows * d, i).map((v) => Math.fround(3 * v)) },
      { shape: [d], values: weights(d, i + 7).map((v) => Math.fround(1.25 + 0.5 * v)) },
      { shape: [d], values: weights(d, i + 11) },
      { shape: [rows, d], values: weights(rows * d, i + 13) },
    ];
  });
  for (const wg of ROW_WORKGROUPS) {
    it(`forward and backward kernels at workgroups of ${wg}, fixed rows of d 1 to 300 (the tolerances above)`, async () => {
      setRowWorkgroupSize(wg);
      for (const [x, w, b, dy] of fixed) {
        await compareForward(
          'norms',
          [x!, w!, b!],
          ([xt, wt, bt]) => [T.rmsNorm(xt!, wt!, 1e-5), T.layerNorm(xt!, wt!, bt!, 1e-5)],
          NORM,
          gpu,
        );
        await compareForward('norm backward', [x!, w!, dy!], backward, NORM_GRAD, gpu);
      }
    });
  }
});

describeGpu('webgpu indexing (exact: gathers copy, scatter-adds sum in the CPU order)', (gpu) => {
  afterEach(() => setRowWorkgroupSize(null));
  const gatherArb = shapeArb(1, 3, 5).chain((s) =>
    fc.tuple(valuesFor(s), fc.integer({ min: 0, max: s.length - 1 }), shapeArb(0, 2, 4)).chain(([x, axis, is]) =>
      // indices include duplicates; out-of-range ones are an IndexRangeError on the CPU (spec/robustness)
      fc.tuple(fc.constant(x), fc.constant(axis), intsFor(is, 0, s[axis]! - 1)),
    ),
  );
  it('gather and scatterAdd along a random axis', async () => {
    await fc.assert(
      fc.asyncProperty(gatherArb, ([x, axis, idx]) =>
        compareForward(
          'gather/scatterAdd',
          [x, idx],
          ([xt, it2]) => {
            const g = T.gather(xt!, it2!, axis);
            return [g, T.scatterAdd(g, it2!, axis, xt!.shape)];
          },
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
  it("scatterAdd at an embedding gradient's shape: many duplicates, rows never hit, the CPU order (exact)", async () => {
    // 300 rows of 8, 500 token ids drawn from the first 120 rows: each hit row sums about four updates in index
    // order (the row lists of scatter_links.wgsl), the other 180 rows stay zero.
    const rng = new T.Rng(5);
    const ids = Array.from({ length: 500 }, () => Math.floor(rng.uniform() * 120));
    const upd = Array.from({ length: 500 * 8 }, () => Math.fround(rng.normal()));
    await compareForward(
      'scatterAdd (embedding gradient)',
      [
        { values: upd, shape: [500, 8] },
        { values: ids, shape: [500], dtype: 'i32' },
      ],
      ([ut, it2]) => T.scatterAdd(ut!, it2!, 0, [300, 8]),
      EXACT,
      gpu,
    );
  });
  it('gather of i32 rows (embedding lookup of token ids)', async () => {
    const arb = fc.tuple(intsFor([6, 3], -50, 50), intsFor([2, 4], 0, 5));
    await fc.assert(
      fc.asyncProperty(arb, ([x, idx]) =>
        compareForward('gather i32', [x, idx], ([xt, it2]) => T.gather(xt!, it2!, 0), EXACT, gpu),
      ),
      RUNS,
    );
  });
  const takeArb = shapeArb(1, 3, 5).chain((s) =>
    fc
      .tuple(valuesFor(s), fc.integer({ min: 0, max: s.length - 1 }), fc.integer({ min: 1, max: 4 }))
      .chain(([x, axis, n]) =>
        fc.tuple(
          fc.constant(x),
          fc.constant(axis),
          intsFor(
            s.map((d, i) => (i === axis ? n : d)),
            0,
            s[axis]! - 1,
          ),
        ),
      ),
  );
  it('takeAlongAxis and putAlongAxisAdd along a random axis', async () => {
    await fc.assert(
      fc.asyncProperty(takeArb, ([x, axis, idx]) =>
        compareForward(
          'takeAlongAxis/putAlongAxisAdd',
          [x, idx],
          ([xt, it2]) => {
            const t = T.takeAlongAxis(xt!, it2!, axis);
            return [t, T.putAlongAxisAdd(t, it2!, axis, xt!.shape)];
          },
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
  for (const wg of ROW_WORKGROUPS)
    it(`tokenLogProbs and crossEntropy, workgroups of ${wg} (picked log-probs; softmax tolerance)`, async () => {
      setRowWorkgroupSize(wg);
      const arb = fc
        .tuple(
          fc.integer({ min: 1, max: 6 }),
          fc.oneof(fc.integer({ min: 2, max: 40 }), fc.integer({ min: 200, max: 700 })),
        )
        .chain(([b, v]) => fc.tuple(valuesFor([b, v], -4, 4), intsFor([b], 0, v - 1)));
      await fc.assert(
        fc.asyncProperty(arb, ([l, t]) =>
          compareForward(
            'tokenLogProbs',
            [l, t],
            ([lt, tt]) => [T.tokenLogProbs(lt!, tt!), T.crossEntropy(lt!, tt!)],
            SOFTMAX,
            gpu,
          ),
        ),
        RUNS,
      );
    });
});

describeGpu('webgpu adamw', (gpu) => {
  it('one update on random parameters, gradients and moments (atol 1e-6, rtol 2e-6: f32 vs float64 arithmetic)', async () => {
    const arb = shapeArb(0, 3, 7).chain((s) =>
      fc.tuple(
        valuesFor(s, -1, 1),
        valuesFor(s, -1, 1),
        valuesFor(s, -0.1, 0.1),
        valuesFor(s, 0, 0.01),
        fc.record({
          lr: fc.constantFrom(1e-3, 3e-4, 0.1),
          beta1: fc.constantFrom(0.9, 0.8),
          beta2: fc.constantFrom(0.999, 0.95),
          eps: fc.constantFrom(1e-8, 1e-6),
          weightDecay: fc.constantFrom(0, 0.01, 0.1),
          step: fc.integer({ min: 1, max: 1000 }),
        }),
      ),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([p, g, m, v, hyper]) =>
        compareForward(
          'adamw',
          [p, g, m, v],
          ([pt, gt, mt, vt]) => {
            const s = T.adamwUpdate(pt!, gt!, mt!, vt!, hyper);
            return [s.param, s.m, s.v];
          },
          { atol: 1e-6, rtol: 2e-6 },
          gpu,
        ),
      ),
      RUNS,
    );
  });
});
