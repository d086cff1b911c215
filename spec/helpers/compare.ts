import { expect } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';

/**
 * Comparing a backend against the reference backend (the numerical oracle: TypeScript loops, f64 where asked):
 * the WebGPU specs and the CPU backend's specs draw their inputs and compare outputs and vector-Jacobian products
 * with these.
 */
export const reference = new T.ReferenceBackend();

/** A tensor's values and shape as plain numbers (generated and shrunk by fast-check). */
export interface Arg {
  readonly shape: readonly number[];
  readonly values: readonly number[];
  readonly dtype?: 'f32' | 'i32';
}

export const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/** Dims 1..maxDim: odd sizes and size-1 axes included. */
export const shapeArb = (minRank = 0, maxRank = 3, maxDim = 7): fc.Arbitrary<number[]> =>
  fc.array(fc.integer({ min: 1, max: maxDim }), { minLength: minRank, maxLength: maxRank });

/** Values on a fine grid in [lo, hi] (f32-exact inputs, so both backends start from the same numbers). */
export const valuesFor = (shape: readonly number[], lo = -2, hi = 2): fc.Arbitrary<Arg> =>
  fc
    .array(fc.integer({ min: 0, max: 4096 }), { minLength: size(shape), maxLength: size(shape) })
    .map((ks) => ({ shape, values: ks.map((k) => Math.fround(lo + ((hi - lo) * k) / 4096)) }));

export const intsFor = (shape: readonly number[], lo: number, hi: number): fc.Arbitrary<Arg> =>
  fc
    .array(fc.integer({ min: lo, max: hi }), { minLength: size(shape), maxLength: size(shape) })
    .map((values) => ({ shape, values, dtype: 'i32' as const }));

export const argArb = (minRank = 0, maxRank = 3, lo = -2, hi = 2, maxDim = 7): fc.Arbitrary<Arg> =>
  shapeArb(minRank, maxRank, maxDim).chain((s) => valuesFor(s, lo, hi));

/** Two shapes that broadcast: dims of a common shape, each maybe set to 1, leading dims maybe dropped. */
export const broadcastPairArb = (maxRank = 4, maxDim = 6): fc.Arbitrary<[number[], number[]]> =>
  shapeArb(0, maxRank, maxDim).chain((out) => {
    const flags = fc.array(fc.boolean(), { minLength: out.length, maxLength: out.length });
    return fc
      .tuple(flags, flags, fc.integer({ min: 0, max: out.length }), fc.integer({ min: 0, max: out.length }))
      .map(([o1, o2, d1, d2]) => [
        out.map((d, i) => (o1[i] ? 1 : d)).slice(d1),
        out.map((d, i) => (o2[i] ? 1 : d)).slice(d2),
      ]);
  });

export const on = (backend: T.Backend, a: Arg): T.Tensor =>
  T.tensor([...a.values], [...a.shape], { dtype: a.dtype ?? 'f32', backend });

/** |got - want| <= atol + rtol |want| elementwise; NaN matches NaN and infinities must match exactly. */
export interface Tol {
  readonly atol: number;
  readonly rtol: number;
}
export const EXACT: Tol = { atol: 0, rtol: 0 };

export function expectClose(what: string, got: ArrayLike<number>, want: ArrayLike<number>, tol: Tol): void {
  expect(got.length, `${what}: length`).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i]!;
    const w = want[i]!;
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    if (!Number.isFinite(w) || !Number.isFinite(g)) {
      if (g !== w) expect.fail(`${what}[${i}]: got ${g}, want ${w}`);
      continue;
    }
    const err = Math.abs(g - w);
    if (err > tol.atol + tol.rtol * Math.abs(w))
      expect.fail(
        `${what}[${i}]: got ${g}, want ${w} (|err| ${err.toExponential(3)} > atol ${tol.atol} + rtol ${tol.rtol} * |want|)`,
      );
  }
}

async function readAll(ts: readonly T.Tensor[]): Promise<T.TypedArray[]> {
  return Promise.all(ts.map((t) => t.data()));
}

const asList = (r: T.Tensor | readonly T.Tensor[]): T.Tensor[] =>
  Array.isArray(r) ? [...(r as readonly T.Tensor[])] : [r as T.Tensor];

/**
 * Run `f` on the reference backend and on backend `g` over the same inputs and compare every output (shape,
 * dtype, values).
 * Everything allocated is disposed again.
 */
export async function compareForward(
  what: string,
  args: readonly Arg[],
  f: (xs: T.Tensor[]) => T.Tensor | readonly T.Tensor[],
  tol: Tol,
  g: T.Backend,
): Promise<void> {
  const run = (backend: T.Backend): [T.Tensor[], T.Tensor[]] => {
    const xs = args.map((a) => on(backend, a));
    return [xs, T.tidy(() => asList(f(xs)))];
  };
  const [cx, cy] = run(reference);
  const [gx, gy] = run(g);
  try {
    const [want, got] = await Promise.all([readAll(cy), readAll(gy)]);
    cy.forEach((c, i) => {
      expect(gy[i]!.shape, `${what}: shape`).toEqual(c.shape);
      expect(gy[i]!.dtype, `${what}: dtype`).toBe(c.dtype);
      expectClose(`${what} out ${i}`, got[i]!, want[i]!, tol);
    });
  } finally {
    T.dispose([...cx, ...cy, ...gx, ...gy]);
  }
}

/** Deterministic, non-uniform cotangent weights for an output of `n` elements. */
export const weights = (n: number, seed = 0): number[] =>
  Array.from({ length: n }, (_, i) => Math.fround(Math.sin(1.37 * i + 0.71 + seed) + 0.25 * ((i % 3) - 1)));

/**
 * The vector-Jacobian product of `f` on the reference backend and on `g`: valueAndGrad of L(xs) = sum(f(xs) * w) with a
 * non-uniform cotangent w, so the whole VJP is compared (values and every input's gradient).
 */
export async function compareGrad(
  what: string,
  args: readonly Arg[],
  f: (xs: T.Tensor[]) => T.Tensor,
  tol: Tol,
  g: T.Backend,
  seed = 0,
): Promise<void> {
  const probe = args.map((a) => on(reference, a));
  const y = T.tidy(() => f(probe));
  const outShape = y.shape;
  T.dispose([...probe, y]);
  const w = weights(size(outShape), seed);
  const run = (backend: T.Backend): T.Tensor[] => {
    const xs = args.map((a) => on(backend, a));
    const wt = T.tensor(w, [...outShape], { backend });
    const [value, grads] = T.valueAndGrad((ps: T.Tensor[]) => T.sum(T.mul(f(ps), wt)))(xs);
    T.dispose([...xs, wt]);
    return [value, ...grads];
  };
  const c = run(reference);
  const gg = run(g);
  try {
    const [want, got] = await Promise.all([readAll(c), readAll(gg)]);
    want.forEach((wv, i) => expectClose(`${what} ${i === 0 ? 'value' : `grad ${i - 1}`}`, got[i]!, wv, tol));
  } finally {
    T.dispose([...c, ...gg]);
  }
}

/**
 * Inputs of causal attention: q [b, tq, hkv * group, d], k and v [b, tk, hkv, d] with tk = tq + up to `maxExtra`,
 * and a key bias [b, tk] whose last row starts with up to 3 padding keys (PAD_BIAS), small biases elsewhere.
 */
export const attentionArb = (maxT: number, dims: number[], maxExtra = 3): fc.Arbitrary<[Arg, Arg, Arg, Arg]> =>
  fc
    .record({
      b: fc.integer({ min: 1, max: 2 }),
      tq: fc.integer({ min: 1, max: maxT }),
      extra: fc.integer({ min: 0, max: maxExtra }),
      hkv: fc.integer({ min: 1, max: 2 }),
      group: fc.integer({ min: 1, max: 3 }),
      d: fc.constantFrom(...dims),
      pad: fc.integer({ min: 0, max: 3 }),
    })
    .chain((x) => {
      const tk = x.tq + x.extra;
      // Left padding of `pad` keys in the last row (PAD_BIAS), small biases elsewhere.
      const bias = valuesFor([x.b, tk], -1, 0).map((a) => ({
        ...a,
        values: a.values.map((v, i) =>
          i >= (x.b - 1) * tk && i < (x.b - 1) * tk + Math.min(x.pad, tk) ? T.PAD_BIAS : v,
        ),
      }));
      return fc.tuple(
        valuesFor([x.b, x.tq, x.hkv * x.group, x.d]),
        valuesFor([x.b, tk, x.hkv, x.d]),
        valuesFor([x.b, tk, x.hkv, x.d]),
        bias,
      );
    });
