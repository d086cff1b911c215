import { expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import type { UnaryOp } from '../../src/index.js';
import { kt, runOp } from '../../src/ops/op.js';
import {
  argArb,
  broadcastPairArb,
  compareForward,
  describeGpu,
  EXACT,
  intsFor,
  RUNS,
  valuesFor,
  type Arg,
  type Tol,
} from './helpers.js';

/**
 * The generic elementwise kernel against the CPU reference: every unary and binary op (f32, and i32 where the
 * op layer needs it), where, cast and fill, on fast-check shapes with size-1 and broadcast axes.
 * Tolerances: ops that are one correctly rounded f32 operation on both sides are exact; WGSL allows division
 * 2.5 ULP and transcendental functions a few ULP (exp: 3 + 2|x| ULP; log: 2^-21 absolute near 1), so those
 * get a relative tolerance of a few times 2^-23 per operation involved.
 */

/** The raw backend kernel (the op layer only calls geluGrad / siluGrad inside vector-Jacobian rules). */
const rawUnary =
  (op: UnaryOp) =>
  (x: T.Tensor): T.Tensor =>
    runOp(op, [x], x.shape, x.dtype, (k) => k.unary(op, kt(op, x)));

const TRANSCENDENTAL: Tol = { atol: 1e-6, rtol: 3e-6 };
/** 1 + tanh(u) cancels for u << 0: tanh's few-ULP error (~1e-7 near -1) survives as absolute error, times |x| <= 4. */
const GELU: Tol = { atol: 4e-6, rtol: 3e-6 };

describeGpu('webgpu elementwise: unary f32', (gpu) => {
  const any = argArb(0, 4, -4, 4);
  const positive = argArb(0, 4, 0.05, 4);
  const cases: [UnaryOp, fc.Arbitrary<Arg>, Tol, string][] = [
    ['neg', any, EXACT, 'exact in f32'],
    ['abs', any, EXACT, 'exact in f32'],
    ['square', any, EXACT, 'one correctly rounded multiply'],
    ['sign', any, EXACT, 'exact'],
    ['relu', any, EXACT, 'exact'],
    ['step', any, EXACT, 'exact'],
    ['reciprocal', positive, { atol: 0, rtol: 4e-7 }, 'WGSL division: 2.5 ULP'],
    ['sqrt', positive, { atol: 0, rtol: 4e-7 }, 'WGSL sqrt: inherited from 1/inverseSqrt, ~2.5 ULP'],
    ['rsqrt', positive, { atol: 0, rtol: 4e-7 }, 'WGSL inverseSqrt: 2 ULP'],
    ['exp', any, { atol: 0, rtol: 2e-6 }, 'WGSL exp: 3 + 2|x| ULP, |x| <= 4'],
    ['log', positive, { atol: 1e-6, rtol: 1e-6 }, 'WGSL log: 3 ULP, 2^-21 absolute near 1'],
    ['tanh', any, TRANSCENDENTAL, 'tanh through exp: a few ULP'],
    ['sigmoid', any, TRANSCENDENTAL, 'exp, add, divide'],
    ['gelu', any, GELU, '1 + tanh cancels for x << 0 (absolute error of tanh near -1)'],
    ['silu', any, TRANSCENDENTAL, 'x * sigmoid'],
    ['geluGrad', any, GELU, '1 + tanh and 1 - tanh^2 cancel for |x| >> 0'],
    ['siluGrad', any, TRANSCENDENTAL, 'sigmoid and a polynomial'],
  ];
  for (const [op, arb, tol, why] of cases) {
    it(`${op} (tolerance atol ${tol.atol}, rtol ${tol.rtol}: ${why})`, async () => {
      await fc.assert(
        fc.asyncProperty(arb, (a) => compareForward(op, [a], ([x]) => rawUnary(op)(x!), tol, gpu)),
        RUNS,
      );
    });
  }
  it('stays finite where a direct formula would overflow (|x| up to 100)', async () => {
    const a: Arg = { shape: [8], values: [-100, -50, -20, -0.5, 0.5, 20, 50, 100] };
    for (const op of ['tanh', 'sigmoid', 'gelu', 'silu', 'geluGrad', 'siluGrad'] as const) {
      await compareForward(op, [a], ([x]) => rawUnary(op)(x!), GELU, gpu);
    }
  });
});

describeGpu('webgpu elementwise: binary f32 with broadcasting', (gpu) => {
  const pair = (lo1: number, hi1: number, lo2: number, hi2: number): fc.Arbitrary<[Arg, Arg]> =>
    broadcastPairArb().chain(([s1, s2]) => fc.tuple(valuesFor(s1, lo1, hi1), valuesFor(s2, lo2, hi2)));
  const cases: [string, fc.Arbitrary<[Arg, Arg]>, (a: T.Tensor, b: T.Tensor) => T.Tensor, Tol, string][] = [
    ['add', pair(-4, 4, -4, 4), T.add, EXACT, 'one correctly rounded add'],
    ['sub', pair(-4, 4, -4, 4), T.sub, EXACT, 'one correctly rounded subtract'],
    ['mul', pair(-4, 4, -4, 4), T.mul, EXACT, 'one correctly rounded multiply'],
    ['div', pair(-4, 4, 0.25, 4), T.div, { atol: 0, rtol: 4e-7 }, 'WGSL division: 2.5 ULP'],
    [
      'pow',
      pair(0.05, 3, -3, 3),
      T.pow,
      { atol: 1e-7, rtol: 4e-6 },
      'exp2(b log2 a): a few ULP scaled by |b log2 a| <= 15',
    ],
    ['maximum', pair(-4, 4, -4, 4), T.maximum, EXACT, 'a selection'],
    ['minimum', pair(-4, 4, -4, 4), T.minimum, EXACT, 'a selection'],
    ['equal', pair(-1, 1, -1, 1), T.equal, EXACT, 'a comparison'],
    ['notEqual', pair(-1, 1, -1, 1), T.notEqual, EXACT, 'a comparison'],
    ['less', pair(-1, 1, -1, 1), T.less, EXACT, 'a comparison'],
    ['lessEqual', pair(-1, 1, -1, 1), T.lessEqual, EXACT, 'a comparison'],
    ['greater', pair(-1, 1, -1, 1), T.greater, EXACT, 'a comparison'],
    ['greaterEqual', pair(-1, 1, -1, 1), T.greaterEqual, EXACT, 'a comparison'],
  ];
  for (const [name, arb, f, tol, why] of cases) {
    it(`${name} (tolerance atol ${tol.atol}, rtol ${tol.rtol}: ${why})`, async () => {
      await fc.assert(
        fc.asyncProperty(arb, ([a, b]) => compareForward(name, [a, b], ([x, y]) => f(x!, y!), tol, gpu)),
        RUNS,
      );
    });
  }
  it('pow of negative bases with integer exponents, zero bases, and x^0 (exact cases of Math.pow)', async () => {
    const a: Arg = { shape: [8], values: [-2, -2, -3, 0, 0, 0, -1.5, 5] };
    const b: Arg = { shape: [8], values: [2, 3, -1, 2, 0, -1, 0.5, 0] };
    await compareForward('pow', [a, b], ([x, y]) => T.pow(x!, y!), { atol: 0, rtol: 1e-6 }, gpu);
  });
  it('comparisons see ties (equal values on a coarse grid)', async () => {
    const arb = broadcastPairArb().chain(([s1, s2]) => fc.tuple(intsFor(s1, -2, 2), intsFor(s2, -2, 2)));
    const asF32 = (a: Arg): Arg => ({ shape: a.shape, values: a.values });
    await fc.assert(
      fc.asyncProperty(arb, ([a, b]) =>
        compareForward(
          'ties',
          [asF32(a), asF32(b)],
          ([x, y]) => [T.equal(x!, y!), T.lessEqual(x!, y!), T.maximum(x!, y!)],
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
});

describeGpu('webgpu elementwise: i32, where, cast, fill', (gpu) => {
  const ipair = broadcastPairArb().chain(([s1, s2]) => fc.tuple(intsFor(s1, -40, 40), intsFor(s2, -6, 6)));
  it('i32 add, sub, mul, div (a / 0 = 0 as the CPU stores it), maximum, minimum and comparisons (exact)', async () => {
    const fs: ((a: T.Tensor, b: T.Tensor) => T.Tensor)[] = [
      T.add,
      T.sub,
      T.mul,
      T.div,
      T.maximum,
      T.minimum,
      T.equal,
      T.notEqual,
      T.less,
      T.lessEqual,
      T.greater,
      T.greaterEqual,
    ];
    await fc.assert(
      fc.asyncProperty(ipair, ([a, b]) =>
        compareForward('i32 binary', [a, b], ([x, y]) => fs.map((f) => f(x!, y!)), EXACT, gpu),
      ),
      RUNS,
    );
  });
  it('i32 neg, abs, square, sign, relu, step (exact)', async () => {
    const arb = fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 3 }).chain((s) => intsFor(s, -1000, 1000));
    const ops: UnaryOp[] = ['neg', 'abs', 'square', 'sign', 'relu', 'step'];
    await fc.assert(
      fc.asyncProperty(arb, (a) =>
        compareForward('i32 unary', [a], ([x]) => ops.map((op) => rawUnary(op)(x!)), EXACT, gpu),
      ),
      RUNS,
    );
  });
  it('an op without an i32 kernel throws a DTypeError naming it; transcendental ops promote i32 to f32', async () => {
    const x = T.tensor([1, 2, 3], [3], { dtype: 'i32', backend: gpu });
    expect(() => T.pow(x, x)).toThrow(T.DTypeError);
    expect(() => T.pow(x, x)).toThrow(/pow/);
    const e = T.exp(x);
    expect(e.dtype).toBe('f32');
    // e, e^2, e^3 to three decimals
    // biome-ignore lint/suspicious/noApproximativeNumericConstant: a rounded expected value, not a stand-in for Math.E
    expect([...(await e.data())].map((v) => Math.round(v * 1e3) / 1e3)).toEqual([2.718, 7.389, 20.086]);
    T.dispose([x, e]);
  });
  it('f64 is CPU-only: creating an f64 tensor throws a DTypeError', () => {
    expect(gpu.supportsDType('f64')).toBe(false);
    expect(() => T.tensor([1], [1], { dtype: 'f64', backend: gpu })).toThrow(T.DTypeError);
  });
  it('where with f32 and i32 conditions, broadcasting all three operands (exact)', async () => {
    const arb = broadcastPairArb(3).chain(([s1, s2]) =>
      fc.tuple(intsFor(s1, -1, 1), valuesFor(s2), valuesFor(s1.slice(1))),
    );
    await fc.assert(
      fc.asyncProperty(arb, ([c, a, b]) =>
        compareForward(
          'where',
          [c, { shape: c.shape, values: c.values }, a, b],
          ([ci, cf, x, y]) => [T.where(ci!, x!, y!), T.where(cf!, x!, y!), T.where(ci!, y!, 2.5)],
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
  it('where on i32 operands (exact)', async () => {
    const arb = fc
      .array(fc.integer({ min: 1, max: 5 }), { maxLength: 3 })
      .chain((s) => fc.tuple(intsFor(s, 0, 1), intsFor(s, -9, 9), intsFor(s, -9, 9)));
    await fc.assert(
      fc.asyncProperty(arb, ([c, a, b]) =>
        compareForward('where i32', [c, a, b], ([x, y, z]) => T.where(x!, y!, z!), EXACT, gpu),
      ),
      RUNS,
    );
  });
  it('cast f32 -> i32 truncates toward zero, i32 -> f32 (exact)', async () => {
    const f = argArb(0, 3, -50, 50);
    await fc.assert(
      fc.asyncProperty(f, (a) =>
        compareForward(
          'cast',
          [a],
          ([x]) => {
            const i = T.cast(x!, 'i32');
            return [i, T.cast(i, 'f32')];
          },
          EXACT,
          gpu,
        ),
      ),
      RUNS,
    );
  });
  it('fill f32 and i32 values (exact bit patterns, -0, infinities and subnormals included)', async () => {
    const arb = fc.tuple(
      fc.array(fc.integer({ min: 0, max: 7 }), { maxLength: 3 }),
      fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
      fc.float({ noNaN: true }),
    );
    await fc.assert(
      fc.asyncProperty(arb, async ([shape, i, f]) => {
        const gi = T.full(shape, i, { dtype: 'i32', backend: gpu });
        const gf = T.full(shape, f, { backend: gpu });
        const [di, df] = await Promise.all([gi.data(), gf.data()]);
        T.dispose([gi, gf]);
        expect(di.length).toBe(shape.reduce((a, b) => a * b, 1));
        expect([...di].every((v) => v === i)).toBe(true);
        expect([...df].every((v) => Object.is(v, Math.fround(f)))).toBe(true);
      }),
      RUNS,
    );
  });
});
