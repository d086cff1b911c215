import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { checkGradient, f64, valuesFor, type Arg } from '../helpers/gradcheck.js';
import { Ref } from '../helpers/reference.js';

/**
 * The fused primitives of the hot paths on the CPU backend in float64: forward values against plain loops
 * written here, and vector-Jacobian rules against central finite differences.
 */
const RUNS = { numRuns: 15 };
const ref = (a: Arg): Ref => new Ref([...a.shape], [...a.values]);
const expectClose = (got: ArrayLike<number>, want: readonly number[], tol: number): void => {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!(Math.abs(got[i]! - want[i]!) <= tol * (1 + Math.abs(want[i]!))))
      expect.fail(`[${i}]: ${got[i]} vs ${want[i]}`);
};

/** Attention shapes: batch, queries <= keys, query heads a multiple of key/value heads, head size. */
const attentionDims = fc.record({
  b: fc.integer({ min: 1, max: 2 }),
  tq: fc.integer({ min: 1, max: 3 }),
  extra: fc.integer({ min: 0, max: 2 }),
  hkv: fc.integer({ min: 1, max: 2 }),
  group: fc.integer({ min: 1, max: 2 }),
  d: fc.integer({ min: 1, max: 3 }),
});
type Dims = { b: number; tq: number; extra: number; hkv: number; group: number; d: number };
const attentionArgs = (x: Dims, biasLo: number): fc.Arbitrary<Arg[]> => {
  const tk = x.tq + x.extra;
  return fc.tuple(
    valuesFor([x.b, x.tq, x.hkv * x.group, x.d]),
    valuesFor([x.b, tk, x.hkv, x.d], -2, 2, 0.0002),
    valuesFor([x.b, tk, x.hkv, x.d], -2, 2, 0.0003),
    valuesFor([x.b, tk], biasLo, 0, 0.0001),
  );
};

/** softmax_j(q_i . k_j / sqrt(d) + bias_j) v_j over the keys query i sees (j <= i + tk - tq), head h -> h / group. */
function attentionRef(q: Ref, k: Ref, v: Ref, bias: Ref | null, group: number): Ref {
  const [, tq, , d] = q.shape as [number, number, number, number];
  const tk = k.shape[1]!;
  return Ref.fill(q.shape, ([b, i, h, e]) => {
    const kh = Math.floor(h! / group);
    const visible = Array.from({ length: i! + tk - tq + 1 }, (_, j) => j);
    const scores = visible.map((j) => {
      let s = 0;
      for (let c = 0; c < d; c++) s += q.at([b!, i!, h!, c]) * k.at([b!, j, kh, c]);
      return s / Math.sqrt(d) + (bias ? bias.at([b!, j]) : 0);
    });
    const m = Math.max(...scores);
    const z = scores.reduce((s, x) => s + Math.exp(x - m), 0);
    return visible.reduce((s, j, n) => s + (Math.exp(scores[n]! - m) / z) * v.at([b!, j, kh, e!]), 0);
  });
}

describe('fused causal attention (CPU, f64)', () => {
  it('forward equals a per-query loop (grouped-query heads, key bias, fewer queries than keys)', () =>
    fc.assert(
      fc.property(
        attentionDims.chain((x) => fc.tuple(fc.constant(x), attentionArgs(x, -3))),
        ([x, [q, k, v, bias]]) => {
          const got = T.causalAttention(f64(q!), f64(k!), f64(v!), { keyBias: f64(bias!) });
          expectClose(got.dataSync(), attentionRef(ref(q!), ref(k!), ref(v!), ref(bias!), x.group).values, 1e-12);
          const plain = T.causalAttention(f64(q!), f64(k!), f64(v!));
          expectClose(plain.dataSync(), attentionRef(ref(q!), ref(k!), ref(v!), null, x.group).values, 1e-12);
        },
      ),
      RUNS,
    ));

  it('a padding query (its own key masked by PAD_BIAS) outputs 0 and passes no gradient, as sdpa; the rest match', () => {
    // The row is left-padded by 2: queries 0 and 1 see only padding keys. f32, as the policy runs.
    const args: Arg[] = [
      { shape: [1, 4, 1, 2], values: [0.5, -1, 2, 0.25, 1, 1, -0.5, 0.75] },
      { shape: [1, 4, 1, 2], values: [1, 2, -1, 0.5, 0.3, 0.1, 2, -2] },
      { shape: [1, 4, 1, 2], values: [1, 2, 3, 4, 5, 6, 7, 8] },
      { shape: [1, 4], values: [T.PAD_BIAS, T.PAD_BIAS, 0, 0] },
    ];
    const [q, k, v, bias] = args.map((a) => T.tensor([...a.values], [...a.shape]));
    const out = T.causalAttention(q!, k!, v!, { keyBias: bias! }).dataSync();
    expect(Array.from(out.slice(0, 4))).toEqual([0, 0, 0, 0]);
    const want = attentionRef(ref(args[0]!), ref(args[1]!), ref(args[2]!), ref(args[3]!), 1).values;
    expectClose(out.slice(4), want.slice(4), 1e-6);
    // The padding queries' cotangent reaches nothing: q's padding rows and every key/value get 0 from it.
    const padRows = T.tensor([1, 1, 0, 0], [1, 4, 1, 1]);
    const grads = T.grad((xs: T.Tensor[]) =>
      T.sum(T.mul(T.causalAttention(xs[0]!, xs[1]!, xs[2]!, { keyBias: bias! }), padRows)),
    )([q!, k!, v!]);
    for (const g of grads) expect(Array.from(g.dataSync()).every((x) => x === 0)).toBe(true);
  });

  it('gradient in q, k and v against finite differences', () =>
    fc.assert(
      fc.property(
        attentionDims.chain((x) => attentionArgs(x, -1)),
        ([q, k, v, bias]) =>
          checkGradient(([a, b, c]) => T.causalAttention(a!, b!, c!, { keyBias: f64(bias!) }), [q!, k!, v!]),
      ),
      RUNS,
    ));

  it('refuses shapes that do not fit, and a watched key bias', () => {
    const x = T.zeros([1, 2, 2, 2], { dtype: 'f64' });
    expect(() =>
      T.causalAttention(x, T.zeros([1, 1, 2, 2], { dtype: 'f64' }), T.zeros([1, 1, 2, 2], { dtype: 'f64' })),
    ).toThrow(T.ShapeError);
    expect(() =>
      T.causalAttention(x, T.zeros([1, 2, 3, 2], { dtype: 'f64' }), T.zeros([1, 2, 3, 2], { dtype: 'f64' })),
    ).toThrow(/multiple/);
    expect(() =>
      T.grad((bias: T.Tensor) => T.sum(T.causalAttention(x, x, x, { keyBias: bias })))(
        T.zeros([1, 2], { dtype: 'f64' }),
      ),
    ).toThrow(/constant/);
  });
});

describe('fused RoPE, SwiGLU, token log-probs, residual + RMSNorm (CPU, f64)', () => {
  const ropeArgs = fc
    .tuple(
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
    )
    .chain(([n, h, h2, half]) =>
      fc.tuple(
        valuesFor([n, h, 2 * half]),
        valuesFor([n, h2, 2 * half]),
        valuesFor([n, 1, half], -1, 1, 0.0001),
        valuesFor([n, 1, half], -1, 1, 0.0002),
      ),
    );
  const rotateRef = (x: Ref, c: Ref, s: Ref, sign: number): number[] => {
    const half = c.shape[2]!;
    return Ref.fill(x.shape, ([r, h, e]) => {
      const i = e! % half;
      const [x1, x2] = [x.at([r!, h!, i]), x.at([r!, h!, i + half])];
      const [cv, sv] = [c.at([r!, 0, i]), sign * s.at([r!, 0, i])];
      return e! < half ? x1 * cv - x2 * sv : x2 * cv + x1 * sv;
    }).values;
  };

  it('rotary and rotaryPair equal the rotate-half formula; inverse undoes it', () =>
    fc.assert(
      fc.property(ropeArgs, ([x, y, c, s]) => {
        const [cs, sn] = [f64(c), f64(s)];
        expectClose(T.rotary(f64(x), cs, sn).dataSync(), rotateRef(ref(x), ref(c), ref(s), 1), 1e-14);
        expectClose(T.rotary(f64(x), cs, sn, true).dataSync(), rotateRef(ref(x), ref(c), ref(s), -1), 1e-14);
        const [a, b] = T.rotaryPair(f64(x), f64(y), cs, sn);
        expectClose(a.dataSync(), rotateRef(ref(x), ref(c), ref(s), 1), 1e-14);
        expectClose(b.dataSync(), rotateRef(ref(y), ref(c), ref(s), 1), 1e-14);
      }),
      RUNS,
    ));

  it('rotary and rotaryPair gradients against finite differences', () =>
    fc.assert(
      fc.property(ropeArgs, ([x, y, c, s]) => {
        checkGradient(([a]) => T.rotary(a!, f64(c), f64(s)), [x]);
        checkGradient(
          ([a, b]) => {
            const [p, q] = T.rotaryPair(a!, b!, f64(c), f64(s));
            return T.add(T.sum(T.mul(p, 0.7)), T.sum(T.square(q)));
          },
          [x, y],
        );
      }),
      RUNS,
    ));

  it('sumSquares gradient against finite differences (2 x per tensor)', () =>
    fc.assert(
      fc.property(fc.tuple(valuesFor([2, 3]), valuesFor([4])), ([x, y]) => {
        checkGradient(([a, b]) => T.sumSquares([a!, b!]), [x, y]);
      }),
      RUNS,
    ));

  const pairArb = fc
    .array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 3 })
    .chain((s) => fc.tuple(valuesFor(s, -4, 4), valuesFor(s, -2, 2, 0.0002)));
  it('swiglu equals silu(gate) * up, and its gradient matches finite differences', () =>
    fc.assert(
      fc.property(pairArb, ([g, u]) => {
        const want = g.values.map((x, i) => (x / (1 + Math.exp(-x))) * u.values[i]!);
        expectClose(T.swiglu(f64(g), f64(u)).dataSync(), want, 1e-14);
        checkGradient(([a, b]) => T.swiglu(a!, b!), [g, u]);
      }),
      RUNS,
    ));

  const logitsArb = fc
    .tuple(
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 6 }),
      fc.constantFrom(1, 0.7, 1.5),
    )
    .chain(([b, t, v, scale]) =>
      fc.tuple(
        valuesFor([b, t, v], -4, 4),
        fc.array(fc.integer({ min: 0, max: v - 1 }), { minLength: b * t, maxLength: b * t }),
        fc.constant(scale),
      ),
    );
  it('tokenLogProbs equals log softmax(scale logits)[target], its gradient matches finite differences', () =>
    fc.assert(
      fc.property(logitsArb, ([x, targets, scale]) => {
        const v = x.shape[2]!;
        const want = targets.map((t, r) => {
          const row = x.values.slice(r * v, (r + 1) * v).map((z) => scale * z);
          const m = Math.max(...row);
          return row[t]! - m - Math.log(row.reduce((s, z) => s + Math.exp(z - m), 0));
        });
        const tg = T.tensor(targets, [x.shape[0]!, x.shape[1]!], { dtype: 'i32' });
        expectClose(T.tokenLogProbs(f64(x), tg, scale).dataSync(), want, 1e-12);
        checkGradient(([a]) => T.tokenLogProbs(a!, tg, scale), [x]);
      }),
      RUNS,
    ));

  it('tokenLogProbs has second derivatives: the gradient of its fused backward matches finite differences', () =>
    fc.assert(
      fc.property(logitsArb, ([x, targets, scale]) => {
        const tg = T.tensor(targets, [x.shape[0]!, x.shape[1]!], { dtype: 'i32' });
        const cot: Arg = { shape: tg.shape, values: targets.map((_, i) => Math.sin(i + 0.5)) };
        checkGradient(
          ([a, c]) => T.grad((z: T.Tensor) => T.sum(T.mul(T.tokenLogProbs(z, tg, scale), c!)))(a!),
          [x, cot],
        );
      }),
      RUNS,
    ));

  it('tokenLogProbs refuses a target outside the vocabulary, naming it', () => {
    const logits = T.zeros([2, 3], { dtype: 'f64' });
    expect(() => T.tokenLogProbs(logits, T.tensor([3, 0], [2], { dtype: 'i32' }))).toThrow(/index 3 .* size 3/);
    expect(() => T.tokenLogProbs(logits, T.tensor([0, -1], [2], { dtype: 'i32' }))).toThrow(T.IndexRangeError);
  });

  const normArgs = fc
    .tuple(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 2, max: 5 }))
    .chain(([r, d]) => fc.tuple(valuesFor([r, d]), valuesFor([r, d], -1, 1, 0.0002), valuesFor([d], 0.5, 1.5, 0.0003)));
  it('addRmsNorm gives x + delta and its RMSNorm; gradients through both outputs match finite differences', () =>
    fc.assert(
      fc.property(normArgs, ([x, dl, w]) => {
        const d = w.shape[0]!;
        const sum = x.values.map((a, i) => a + dl.values[i]!);
        const normed = sum.map((s, i) => {
          const row = sum.slice(Math.floor(i / d) * d, Math.floor(i / d) * d + d);
          return (s / Math.sqrt(row.reduce((a, b) => a + b * b, 0) / d + 1e-5)) * w.values[i % d]!;
        });
        const out = T.addRmsNorm(f64(x), f64(dl), f64(w), 1e-5);
        expectClose(out.sum.dataSync(), sum, 1e-14);
        expectClose(out.normed.dataSync(), normed, 1e-12);
        checkGradient(
          ([a, b, c]) => {
            const o = T.addRmsNorm(a!, b!, c!, 1e-5);
            return T.add(o.normed, T.mul(o.sum, 0.5));
          },
          [x, dl, w],
        );
      }),
      RUNS,
    ));
});

describe('multi-tensor AdamW and sum of squares (CPU, f64)', () => {
  const leaves = fc
    .array(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 2 }), { minLength: 1, maxLength: 5 })
    .chain((shapes) =>
      fc.tuple(
        ...shapes.map((s) =>
          fc.tuple(valuesFor(s), valuesFor(s, -3, 3, 0.0002), valuesFor(s, -1, 1, 0.0003), valuesFor(s, 0, 1, 0.0004)),
        ),
      ),
    );
  it('equals a per-leaf AdamW loop on gradients clipped by the global norm', () =>
    fc.assert(
      fc.property(leaves, fc.constantFrom(undefined, 0.5, 100), (ls, maxNorm) => {
        const ss = ls.reduce((s, [, g]) => s + g.values.reduce((a, x) => a + x * x, 0), 0);
        const sumSq = T.sumSquares(ls.map(([, g]) => f64(g)));
        expectClose(sumSq.dataSync(), [ss], 1e-14);
        const scale = maxNorm === undefined ? 1 : Math.min(maxNorm / (Math.sqrt(ss) + 1e-6), 1);
        const h = { lr: 0.01, beta1: 0.9, beta2: 0.99, eps: 1e-8, step: 3 };
        const weightDecays = ls.map((_, i) => (i % 2) * 0.1);
        const out = T.adamwUpdateMany(
          ls.map(([p]) => f64(p)),
          ls.map(([, g]) => f64(g)),
          ls.map(([, , m]) => f64(m)),
          ls.map(([, , , v]) => f64(v)),
          maxNorm === undefined ? null : sumSq,
          {
            ...h,
            weightDecays,
            ...(maxNorm === undefined ? {} : { maxNorm }),
          },
        );
        ls.forEach(([p, g, m, v], i) => {
          const m1 = g.values.map((x, j) => h.beta1 * m.values[j]! + (1 - h.beta1) * x * scale);
          const v1 = g.values.map((x, j) => h.beta2 * v.values[j]! + (1 - h.beta2) * (x * scale) ** 2);
          const p1 = p.values.map(
            (x, j) =>
              x * (1 - h.lr * weightDecays[i]!) -
              (h.lr * (m1[j]! / (1 - h.beta1 ** 3))) / (Math.sqrt(v1[j]! / (1 - h.beta2 ** 3)) + h.eps),
          );
          expectClose(out[i]!.m.dataSync(), m1, 1e-14);
          expectClose(out[i]!.v.dataSync(), v1, 1e-14);
          expectClose(out[i]!.param.dataSync(), p1, 1e-13);
        });
      }),
      RUNS,
    ));
});
