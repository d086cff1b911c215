import { describe, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import {
  argArb,
  broadcastPairArb,
  checkGradient,
  distinctValuesFor,
  shapeArb,
  valuesFor,
  type Arg,
} from '../helpers/gradcheck.js';

/**
 * Every op's vector-Jacobian rule against central finite differences in float64, on fast-check shapes and
 * values (size-1 axes and broadcasting included). Inputs are kept off each op's kinks and poles.
 */
const RUNS = { numRuns: 20 };

const prop1 = (arb: fc.Arbitrary<Arg>, f: (x: T.Tensor) => T.Tensor): void =>
  fc.assert(
    fc.property(arb, (a) => checkGradient(([x]) => f(x!), [a])),
    RUNS,
  );

describe('gradient check: unary elementwise', () => {
  const any = argArb(0, 3);
  const positive = argArb(0, 3, 0.3, 3);
  const cases: [string, fc.Arbitrary<Arg>, (x: T.Tensor) => T.Tensor][] = [
    ['neg', any, T.neg],
    ['exp', any, T.exp],
    ['log', positive, T.log],
    ['sqrt', positive, T.sqrt],
    ['rsqrt', positive, T.rsqrt],
    ['tanh', any, T.tanh],
    ['sigmoid', argArb(0, 3, -8, 8), T.sigmoid],
    ['gelu', argArb(0, 3, -4, 4), T.gelu],
    ['silu', argArb(0, 3, -6, 6), T.silu],
    ['abs', any, T.abs],
    ['square', any, T.square],
    ['reciprocal', positive, T.reciprocal],
    ['relu', any, T.relu],
    ['sign (zero gradient)', any, T.sign],
  ];
  for (const [name, arb, f] of cases) it(name, () => prop1(arb, f));
});

describe('gradient check: binary elementwise with broadcasting', () => {
  const pair = (lo1: number, hi1: number, lo2: number, hi2: number): fc.Arbitrary<[Arg, Arg]> =>
    broadcastPairArb().chain(([s1, s2]) =>
      fc.tuple(valuesFor(s1, lo1, hi1, 0.000123), valuesFor(s2, lo2, hi2, 0.000377)),
    );
  const cases: [string, fc.Arbitrary<[Arg, Arg]>, (a: T.Tensor, b: T.Tensor) => T.Tensor][] = [
    ['add', pair(-2, 2, -2, 2), T.add],
    ['sub', pair(-2, 2, -2, 2), T.sub],
    ['mul', pair(-2, 2, -2, 2), T.mul],
    ['div', pair(-2, 2, 0.5, 2), T.div],
    ['pow', pair(0.5, 2, -2, 2), T.pow],
    ['maximum', pair(-2, 2, -2, 2), T.maximum],
    ['minimum', pair(-2, 2, -2, 2), T.minimum],
  ];
  for (const [name, arb, f] of cases) {
    it(name, () =>
      fc.assert(
        fc.property(arb, ([a, b]) => checkGradient(([x, y]) => f(x!, y!), [a, b])),
        RUNS,
      ),
    );
  }
  it('comparison masks carry no gradient', () =>
    fc.assert(
      fc.property(pair(-2, 2, -2, 2), ([a, b]) =>
        checkGradient(([x, y]) => T.add(T.greater(x!, y!), T.add(T.lessEqual(x!, y!), T.equal(x!, y!))), [a, b]),
      ),
      RUNS,
    ));
});

describe('gradient check: selection', () => {
  it('where (cond, a, b broadcast)', () =>
    fc.assert(
      fc.property(
        broadcastPairArb().chain(([s1, s2]) =>
          fc.tuple(valuesFor(s1), valuesFor(s2, -2, 2, 0.0002), valuesFor(s1, -1, 1, 0.0001)),
        ),
        ([a, b, c]) => checkGradient(([x, y, z]) => T.where(T.greater(z!, 0), x!, y!), [a, b, c]),
      ),
      RUNS,
    ));
  it('clamp with number bounds', () => prop1(argArb(0, 3), (x) => T.clamp(x, -0.5, 0.7)));
  it('clamp with tensor bounds', () =>
    fc.assert(
      fc.property(
        shapeArb(1, 3).chain((s) =>
          fc.tuple(valuesFor(s), valuesFor(s, -1.5, -0.2, 0.0002), valuesFor(s, 0.2, 1.5, 0.0003)),
        ),
        ([a, lo, hi]) => checkGradient(([x, l, h]) => T.clamp(x!, l!, h!), [a, lo, hi]),
      ),
      RUNS,
    ));
});

/** A shape with at least one axis and a random axis subset of it. */
const withAxes = (arb: (s: number[]) => fc.Arbitrary<Arg>): fc.Arbitrary<[Arg, number[], boolean]> =>
  shapeArb(1, 3).chain((s) => fc.tuple(arb(s), fc.subarray([...s.keys()], { minLength: 1 }), fc.boolean()));

describe('gradient check: reductions over axes', () => {
  const cases: [
    string,
    (s: number[]) => fc.Arbitrary<Arg>,
    (x: T.Tensor, axes: number[], keep: boolean) => T.Tensor,
  ][] = [
    ['sum', (s) => valuesFor(s), T.sum],
    ['mean', (s) => valuesFor(s), T.mean],
    ['max', distinctValuesFor, T.max],
    ['min', distinctValuesFor, T.min],
    ['logsumexp', (s) => valuesFor(s, -5, 5), T.logsumexp],
    ['variance', (s) => valuesFor(s), T.variance],
  ];
  for (const [name, arb, f] of cases) {
    it(name, () =>
      fc.assert(
        fc.property(withAxes(arb), ([a, axes, keep]) => checkGradient(([x]) => f(x!, axes, keep), [a])),
        RUNS,
      ),
    );
  }
  it('sum over all axes of any rank', () => prop1(argArb(0, 3), (x) => T.sum(x)));
});

describe('gradient check: matmul', () => {
  const dims = fc.record({
    m: fc.integer({ min: 1, max: 4 }),
    k: fc.integer({ min: 1, max: 4 }),
    n: fc.integer({ min: 1, max: 4 }),
  });
  it('batched with broadcast batch dims and transposes', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(dims, broadcastPairArb(2), fc.boolean(), fc.boolean())
          .chain(([{ m, k, n }, [ba, bb], ta, tb]) =>
            fc.tuple(
              valuesFor([...ba, ...(ta ? [k, m] : [m, k])]),
              valuesFor([...bb, ...(tb ? [n, k] : [k, n])], -2, 2, 0.0002),
              fc.constant([ta, tb] as const),
            ),
          ),
        ([a, b, [ta, tb]]) => checkGradient(([x, y]) => T.matmul(x!, y!, { transA: ta, transB: tb }), [a, b]),
      ),
      RUNS,
    ));
  it('1-D operands (vector-matrix, matrix-vector, dot)', () =>
    fc.assert(
      fc.property(
        dims.chain(({ m, k }) => fc.tuple(valuesFor([k]), valuesFor([k, m]), valuesFor([m, k]), valuesFor([k]))),
        ([v, mat, mat2, w]) => {
          checkGradient(([x, y]) => T.matmul(x!, y!), [v, mat]);
          checkGradient(([x, y]) => T.matmul(x!, y!), [mat2, w]);
          checkGradient(([x, y]) => T.matmul(x!, y!), [v, w]);
        },
      ),
      RUNS,
    ));
});

describe('gradient check: movement', () => {
  it('reshape (with -1)', () => prop1(argArb(1, 3), (x) => T.reshape(x, [-1])));
  it('expand (broadcast to a larger shape)', () =>
    fc.assert(
      fc.property(
        broadcastPairArb().chain(([s, t]) => valuesFor(s).map((a) => [a, T.broadcastShapes('t', s, t)] as const)),
        ([a, out]) => checkGradient(([x]) => T.expand(x!, out), [a]),
      ),
      RUNS,
    ));
  it('permute', () =>
    fc.assert(
      fc.property(
        shapeArb(1, 4).chain((s) =>
          fc.tuple(valuesFor(s), fc.shuffledSubarray([...s.keys()], { minLength: s.length, maxLength: s.length })),
        ),
        ([a, perm]) => checkGradient(([x]) => T.permute(x!, perm), [a]),
      ),
      RUNS,
    ));
  it('transpose of two axes', () => prop1(argArb(2, 3), (x) => T.transpose(x, 0, -1)));
  const sliced = shapeArb(1, 3).chain((s) =>
    fc.tuple(
      valuesFor(s),
      fc.tuple(
        ...s.map((d) =>
          fc.integer({ min: 0, max: d - 1 }).chain((b) => fc.tuple(fc.constant(b), fc.integer({ min: 1, max: d - b }))),
        ),
      ),
    ),
  );
  it('slice', () =>
    fc.assert(
      fc.property(sliced, ([a, bs]) =>
        checkGradient(
          ([x]) =>
            T.slice(
              x!,
              bs.map((b) => b[0]),
              bs.map((b) => b[1]),
            ),
          [a],
        ),
      ),
      RUNS,
    ));
  it('pad', () =>
    fc.assert(
      fc.property(sliced, ([a, bs]) =>
        checkGradient(
          ([x]) =>
            T.pad(
              x!,
              bs.map((b) => b[0]),
              a.shape.map((d, i) => d + bs[i]![0] + bs[i]![1]),
            ),
          [a],
        ),
      ),
      RUNS,
    ));
  it('concat, stack and split', () =>
    fc.assert(
      fc.property(
        shapeArb(1, 3).chain((s) =>
          fc.tuple(fc.integer({ min: 0, max: s.length - 1 }), fc.integer({ min: 1, max: 3 })).chain(([axis, d2]) => {
            const s2 = s.map((d, i) => (i === axis ? d2 : d));
            return fc.tuple(valuesFor(s), valuesFor(s2, -2, 2, 0.0002), valuesFor(s, -1, 1, 0.0001), fc.constant(axis));
          }),
        ),
        ([a, b, c, axis]) => {
          checkGradient(([x, y]) => T.concat([x!, y!], axis), [a, b]);
          checkGradient(([x, z]) => T.stack([x!, z!], axis), [a, c]);
          checkGradient(
            ([x, y]) => {
              const [p, q] = T.split(T.concat([x!, y!], axis), [a.shape[axis]!, b.shape[axis]!], axis);
              return T.sub(T.mul(p!, 2), T.sum(q!));
            },
            [a, b],
          );
        },
      ),
      RUNS,
    ));
  it('squeeze and expandDims', () => prop1(argArb(0, 3), (x) => T.squeeze(T.expandDims(T.expandDims(x, 0), -1))));
});

describe('gradient check: indexing', () => {
  const table = fc.tuple(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }), shapeArb(1, 2, 4));
  it('gather (embedding lookup; repeated ids sum)', () =>
    fc.assert(
      fc.property(
        table.chain(([v, d, idShape]) =>
          fc.tuple(
            valuesFor([v, d]),
            fc.array(fc.integer({ min: 0, max: v - 1 }), {
              minLength: idShape.reduce((p, q) => p * q, 1),
              maxLength: idShape.reduce((p, q) => p * q, 1),
            }),
            fc.constant(idShape),
          ),
        ),
        ([a, ids, idShape]) => checkGradient(([x]) => T.gather(x!, T.tensor(ids, idShape, { dtype: 'i32' }), 0), [a]),
      ),
      RUNS,
    ));
  it('gather along an inner axis', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 3 }))
          .chain(([p, v, q]) =>
            fc.tuple(
              valuesFor([p, v, q]),
              fc.array(fc.integer({ min: 0, max: v - 1 }), { minLength: 1, maxLength: 5 }),
            ),
          ),
        ([a, ids]) => checkGradient(([x]) => T.gather(x!, T.tensor(ids, [ids.length], { dtype: 'i32' }), 1), [a]),
      ),
      RUNS,
    ));
  const picks = fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 5 }))
    .chain(([b, t, v]) =>
      fc.tuple(
        valuesFor([b, t, v], -3, 3),
        fc.array(fc.integer({ min: 0, max: v - 1 }), { minLength: b * t, maxLength: b * t }),
        fc.constant([b, t] as const),
      ),
    );
  it('takeAlongAxis (picking the sampled token)', () =>
    fc.assert(
      fc.property(picks, ([a, ids, [b, t]]) =>
        checkGradient(([x]) => T.takeAlongAxis(x!, T.tensor(ids, [b, t, 1], { dtype: 'i32' }), 2), [a]),
      ),
      RUNS,
    ));
  it('scatterAdd and putAlongAxisAdd (the adjoints, themselves differentiated)', () =>
    fc.assert(
      fc.property(picks, ([a, ids, [b, t]]) => {
        const idx = T.tensor(ids, [b, t, 1], { dtype: 'i32' });
        checkGradient(([x]) => T.putAlongAxisAdd(T.takeAlongAxis(x!, idx, 2), idx, 2, a.shape), [a]);
        const rows = T.tensor(ids.slice(0, b), [b], { dtype: 'i32' });
        const v = a.shape[2]!;
        checkGradient(
          ([x]) => T.scatterAdd(T.reshape(T.slice(x!, [0, 0, 0], [b, 1, v]), [b, v]), rows, 0, [v, v]),
          [a],
        );
      }),
      RUNS,
    ));
  it('tokenLogProbs and crossEntropy', () =>
    fc.assert(
      fc.property(picks, ([a, ids, [b, t]]) => {
        const targets = T.tensor(ids, [b, t], { dtype: 'i32' });
        checkGradient(([x]) => T.tokenLogProbs(x!, targets), [a]);
        checkGradient(([x]) => T.crossEntropy(x!, targets), [a]);
        checkGradient(([x]) => T.crossEntropy(x!, targets, 'none'), [a]);
      }),
      RUNS,
    ));
});

describe('gradient check: softmax, norms, attention', () => {
  const withAxis = shapeArb(1, 3).chain((s) =>
    fc.tuple(valuesFor(s, -4, 4), fc.integer({ min: -s.length, max: s.length - 1 })),
  );
  it('softmax along any axis', () =>
    fc.assert(
      fc.property(withAxis, ([a, axis]) => checkGradient(([x]) => T.softmax(x!, axis), [a])),
      RUNS,
    ));
  it('logSoftmax along any axis', () =>
    fc.assert(
      fc.property(withAxis, ([a, axis]) => checkGradient(([x]) => T.logSoftmax(x!, axis), [a])),
      RUNS,
    ));
  const normArgs = shapeArb(1, 3)
    .filter((s) => s[s.length - 1]! >= 2)
    .chain((s) =>
      fc.tuple(
        valuesFor(s),
        valuesFor([s[s.length - 1]!], 0.5, 1.5, 0.0002),
        valuesFor([s[s.length - 1]!], -1, 1, 0.0003),
      ),
    );
  it('rmsNorm (x and weight)', () =>
    fc.assert(
      fc.property(normArgs, ([a, w]) => checkGradient(([x, g]) => T.rmsNorm(x!, g!, 1e-5), [a, w])),
      RUNS,
    ));
  it('layerNorm (x, weight and bias)', () =>
    fc.assert(
      fc.property(normArgs, ([a, w, b]) => checkGradient(([x, g, c]) => T.layerNorm(x!, g!, c!, 1e-5), [a, w, b])),
      RUNS,
    ));
  it('causal attention (q, k, v [B, T, H, D]), including fewer queries than keys (more in fused.spec.ts)', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(
            fc.integer({ min: 1, max: 2 }),
            fc.integer({ min: 1, max: 4 }),
            fc.integer({ min: 0, max: 2 }),
            fc.integer({ min: 1, max: 3 }),
          )
          .chain(([h, tq, extra, d]) =>
            fc.tuple(
              valuesFor([1, tq, h, d]),
              valuesFor([1, tq + extra, h, d], -2, 2, 0.0002),
              valuesFor([1, tq + extra, h, d], -2, 2, 0.0003),
            ),
          ),
        ([q, k, v]) => checkGradient(([a, b, c]) => T.causalAttention(a!, b!, c!), [q, k, v]),
      ),
      RUNS,
    ));
});
