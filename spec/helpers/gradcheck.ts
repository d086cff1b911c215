import { expect } from 'vitest';
import fc from 'fast-check';
import { grad, mul, sum, tensor, tidy, type Tensor } from '../../src/index.js';

/** A tensor's values and shape as plain numbers, so fast-check can generate and shrink them. */
export interface Arg {
  readonly shape: readonly number[];
  readonly values: readonly number[];
}

export const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** A shape of the given rank range with small dims (size-1 axes included). */
export const shapeArb = (minRank = 0, maxRank = 3, maxDim = 4): fc.Arbitrary<number[]> =>
  fc.array(fc.integer({ min: 1, max: maxDim }), { minLength: minRank, maxLength: maxRank });

/**
 * Values for a shape on a grid of (hi - lo) / 1000 in [lo, hi], shifted by `offset`. Giving two operands
 * different offsets keeps them apart (no ties for maximum/minimum), and an offset keeps values off 0 (abs, relu).
 */
export const valuesFor = (shape: readonly number[], lo = -2, hi = 2, offset = 0.000377): fc.Arbitrary<Arg> =>
  fc
    .array(fc.integer({ min: 0, max: 1000 }), { minLength: size(shape), maxLength: size(shape) })
    .map((ks) => ({ shape, values: ks.map((k) => lo + ((hi - lo) * k) / 1000 + offset) }));

/** Distinct values (no ties), for max/min reductions. */
export const distinctValuesFor = (shape: readonly number[]): fc.Arbitrary<Arg> =>
  fc
    .uniqueArray(fc.integer({ min: -5000, max: 5000 }), { minLength: size(shape), maxLength: size(shape) })
    .map((ks) => ({ shape, values: ks.map((k) => k / 1000 + 0.000377) }));

export const argArb = (minRank = 0, maxRank = 3, lo = -2, hi = 2): fc.Arbitrary<Arg> =>
  shapeArb(minRank, maxRank).chain((s) => valuesFor(s, lo, hi));

/** Two shapes that broadcast together: dims of a common shape, each randomly set to 1 or dropped from the left. */
export const broadcastPairArb = (maxRank = 3): fc.Arbitrary<[number[], number[]]> =>
  shapeArb(0, maxRank).chain((out) =>
    fc
      .tuple(
        fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length }),
        fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length }),
        fc.integer({ min: 0, max: out.length }),
        fc.integer({ min: 0, max: out.length }),
      )
      .map(([ones1, ones2, drop1, drop2]) => [
        out.map((d, i) => (ones1[i] ? 1 : d)).slice(drop1),
        out.map((d, i) => (ones2[i] ? 1 : d)).slice(drop2),
      ]),
  );

export const f64 = (a: Arg): Tensor => tensor([...a.values], [...a.shape], { dtype: 'f64' });

/** Deterministic pseudo-random cotangent weights (not all equal, so every output element matters differently). */
const weights = (n: number): number[] =>
  Array.from({ length: n }, (_, i) => Math.sin(1.7 * i + 0.3) + 0.1 * ((i % 3) - 1));

/**
 * Central finite differences in float64 against the engine's gradient of L(x) = sum(f(x) * w), w a fixed
 * non-uniform weight, so the whole vector-Jacobian product of f is checked, not just its column sums.
 * Tolerance: |analytic - numeric| <= atol + rtol * |numeric|, with h = 1e-6 (truncation error O(h^2 f''')).
 */
export function checkGradient(
  f: (xs: Tensor[]) => Tensor,
  args: readonly Arg[],
  opts: { atol?: number; rtol?: number; h?: number } = {},
): void {
  const { atol = 1e-6, rtol = 1e-5, h = 1e-6 } = opts;
  const loss = (xs: Tensor[]): Tensor => {
    const y = f(xs);
    return sum(mul(y, tensor(weights(y.size), [...y.shape], { dtype: 'f64' })));
  };
  const lossAt = (vals: number[][]): number =>
    tidy(() => loss(vals.map((v, i) => tensor(v, [...args[i]!.shape], { dtype: 'f64' })))).itemSync();
  const analytic = tidy(() => grad(loss)(args.map(f64)).map((g) => Array.from(g.dataSync())));
  const vals = args.map((a) => [...a.values]);
  args.forEach((a, i) => {
    expect(analytic[i]!.length).toBe(size(a.shape));
    for (let j = 0; j < a.values.length; j++) {
      const orig = vals[i]![j]!;
      vals[i]![j] = orig + h;
      const up = lossAt(vals);
      vals[i]![j] = orig - h;
      const down = lossAt(vals);
      vals[i]![j] = orig;
      const numeric = (up - down) / (2 * h);
      const got = analytic[i]![j]!;
      if (!(Math.abs(got - numeric) <= atol + rtol * Math.abs(numeric))) {
        throw new Error(
          `input ${i} element ${j}: analytic ${got} vs numeric ${numeric} (shapes ${JSON.stringify(args.map((x) => x.shape))})`,
        );
      }
    }
  });
}
