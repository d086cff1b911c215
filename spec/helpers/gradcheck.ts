import { expect } from 'vitest';
import fc from 'fast-check';
import { grad, mul, Rng, sum, tensor, tidy, treeLeaves, treeMap, type Tensor } from '../../src/index.js';

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

/**
 * Gradients of a pytree against central differences (f64): `trials` random entries of random leaves, each within
 * 1e-7 + 1e-5 of the numeric value. `grads` mirrors `tree` (what `valueAndGrad(loss)(tree)` returned).
 */
export function expectTreeGradientsMatch(
  loss: (tree: never) => Tensor,
  tree: unknown,
  grads: unknown,
  opts: { trials?: number; seed?: number; h?: number } = {},
): void {
  const leaves = treeLeaves(tree);
  const gradLeaves = treeLeaves(grads);
  expect(gradLeaves.length).toBe(leaves.length);
  const rng = new Rng(opts.seed ?? 17);
  const h = opts.h ?? 1e-6;
  for (let trial = 0; trial < (opts.trials ?? 20); trial++) {
    const li = rng.int(leaves.length);
    const leaf = leaves[li]!;
    const ei = rng.int(leaf.size);
    const at = (delta: number): number =>
      tidy(() => {
        const v = Float64Array.from(leaf.dataSync());
        v[ei] = v[ei]! + delta;
        const bumped = tensor(v, leaf.shape, { dtype: 'f64', backend: leaf.backend });
        return loss(treeMap(tree, (t, i) => (i === li ? bumped : t)) as never);
      }).itemSync();
    const numeric = (at(h) - at(-h)) / (2 * h);
    const analytic = gradLeaves[li]!.dataSync()[ei]!;
    expect(Math.abs(analytic - numeric)).toBeLessThan(1e-7 + 1e-5 * Math.abs(numeric));
  }
}
