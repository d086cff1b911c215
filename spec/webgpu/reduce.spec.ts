import { expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import {
  compareForward,
  describeGpu,
  EXACT,
  intsFor,
  RUNS,
  shapeArb,
  valuesFor,
  type Arg,
  type Tol,
} from './helpers.js';

/**
 * Reductions against the CPU backend over random axis sets (one run of axes, several separated runs, all
 * axes, none), short rows (one thread per output) and long rows (workgroup-shared tree).
 * Tolerances: max/min are exact (selections). The CPU sums in float64 and rounds once; the GPU sums in f32,
 * in a different order, so sums get atol 2e-6 per reduced element (inputs in [-2, 2]; the rounding error of an
 * f32 sum of R terms is at most R * 2^-24 * sum|x|, typically far less) and logsumexp rtol 2e-6 (exp and log
 * are a few ULP each).
 */
const reducedCount = (shape: readonly number[], axes: readonly number[]): number =>
  axes.reduce((s, a) => s * shape[a]!, 1);

const axesArb = (a: Arg): fc.Arbitrary<number[]> => fc.subarray([...a.shape.keys()]);

const sumTol = (a: Arg, axes: readonly number[]): Tol => ({
  atol: 2e-6 * reducedCount(a.shape, axes.length ? axes : [...a.shape.keys()]),
  rtol: 1e-6,
});
const LSE: Tol = { atol: 2e-6, rtol: 2e-6 };

describeGpu('webgpu reductions', (gpu) => {
  const small = shapeArb(0, 4, 6).chain((s) => valuesFor(s));
  const long = fc
    .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 120, max: 700 }))
    .chain(([r, n]) => valuesFor([r, n]));

  for (const [name, arb] of [
    ['short rows', small],
    ['long rows (tree)', long],
  ] as const) {
    it(`sum over random axes, ${name} (atol 2e-6 per reduced element: f32 vs f64 accumulation)`, async () => {
      await fc.assert(
        fc.asyncProperty(
          arb.chain((a) => fc.tuple(fc.constant(a), axesArb(a))),
          ([a, axes]) => compareForward('sum', [a], ([x]) => T.sum(x!, axes, true), sumTol(a, axes), gpu),
        ),
        RUNS,
      );
    });
    it(`max and min over random axes, ${name} (exact: selections)`, async () => {
      await fc.assert(
        fc.asyncProperty(
          arb.chain((a) => fc.tuple(fc.constant(a), axesArb(a))),
          ([a, axes]) => compareForward('max/min', [a], ([x]) => [T.max(x!, axes, true), T.min(x!, axes)], EXACT, gpu),
        ),
        RUNS,
      );
    });
    it(`logsumexp over random axes, ${name} (atol, rtol 2e-6: exp and log are a few ULP)`, async () => {
      await fc.assert(
        fc.asyncProperty(
          arb.chain((a) => fc.tuple(fc.constant(a), axesArb(a))),
          ([a, axes]) => compareForward('logsumexp', [a], ([x]) => T.logsumexp(x!, axes, true), LSE, gpu),
        ),
        RUNS,
      );
    });
  }

  it('logsumexp is stable for large inputs and exact -inf rows stay -inf', async () => {
    const a: Arg = {
      shape: [3, 4],
      values: [1000, 1001, 999, 1000, -1000, -1001, -999, -1000, -Infinity, -Infinity, -Infinity, -Infinity],
    };
    await compareForward('logsumexp', [a], ([x]) => T.logsumexp(x!, 1), LSE, gpu);
    const long: Arg = {
      shape: [2, 300],
      values: Array.from({ length: 600 }, (_, i) => (i < 300 ? 500 + (i % 7) : -Infinity)),
    };
    await compareForward('logsumexp tree', [long], ([x]) => T.logsumexp(x!, 1), LSE, gpu);
  });

  it('mean and variance (composites of sum) over random axes', async () => {
    await fc.assert(
      fc.asyncProperty(
        small.chain((a) => fc.tuple(fc.constant(a), axesArb(a))),
        ([a, axes]) =>
          compareForward(
            'mean/variance',
            [a],
            ([x]) => [T.mean(x!, axes), T.variance(x!, axes)],
            { atol: 1e-5, rtol: 1e-5 },
            gpu,
          ),
      ),
      RUNS,
    );
  });

  // Rows past one workgroup's reach (4,096 values a thread) are split over workgroups: before, Mesa's llvmpipe
  // ended a thread's loop after 65,535 iterations and a sum of 4,194,240 ones came out as 131,070.
  it('rows of millions: split over workgroups, the same results', async () => {
    const n = 64 * 65535 + 3;
    const ones = T.ones([n], { backend: gpu });
    expect((await T.sum(ones).data())[0]).toBe(n); // exact: every partial sum is an integer below 2^24
    const values = Array.from({ length: 3 * 300_007 }, (_, i) => Math.sin(i * 0.37) * 2);
    values[2 * 300_007 - 5] = 9; // the row's largest, in its last part
    const rows: Arg = { shape: [3, 300_007], values };
    await compareForward('max/min', [rows], ([x]) => [T.max(x!, 1), T.min(x!, 1)], EXACT, gpu);
    await compareForward('logsumexp', [rows], ([x]) => T.logsumexp(x!, 1), LSE, gpu);
    await compareForward('sum', [rows], ([x]) => T.sum(x!, 1), sumTol(rows, [1]), gpu);
    const ints: Arg = {
      shape: [300_007],
      values: Array.from({ length: 300_007 }, (_, i) => (i % 2001) - 1000),
      dtype: 'i32',
    };
    await compareForward('i32 sum', [ints], ([x]) => [T.sum(x!), T.max(x!)], EXACT, gpu);
  });

  it('a fold of 70,000 values down a column (one thread per output before: the same loop limit)', async () => {
    const cols: Arg = { shape: [70_000, 3], values: Array.from({ length: 210_000 }, (_, i) => Math.cos(i) * 2) };
    await compareForward('sum', [cols], ([x]) => [T.sum(x!, [0]), T.max(x!, [0])], sumTol(cols, [0]), gpu);
  });

  it('i32 sum, max and min (exact: integer arithmetic)', async () => {
    const arb = shapeArb(0, 3, 6)
      .chain((s) => intsFor(s, -1000, 1000))
      .chain((a) => fc.tuple(fc.constant(a), axesArb(a)));
    await fc.assert(
      fc.asyncProperty(arb, ([a, axes]) =>
        compareForward('i32 reduce', [a], ([x]) => [T.sum(x!, axes), T.max(x!, axes), T.min(x!, axes)], EXACT, gpu),
      ),
      RUNS,
    );
  });
});
