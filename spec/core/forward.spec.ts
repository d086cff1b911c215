import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { broadcastPairArb, distinctValuesFor, shapeArb, valuesFor, type Arg } from '../helpers/gradcheck.js';
import { Ref } from '../helpers/reference.js';

/** Forward values of every op against plain-loop references written here, not by calling the engine. */
const f64 = (a: Arg): T.Tensor => T.tensor([...a.values], [...a.shape], { dtype: 'f64' });
const ref = (a: Arg): Ref => new Ref([...a.shape], [...a.values]);
const expectClose = (t: T.Tensor, r: Ref, tol = 1e-12): void => {
  expect(t.shape).toEqual(r.shape);
  const got = t.dataSync();
  r.values.forEach((v, i) => {
    if (!(Math.abs(got[i]! - v) <= tol * (1 + Math.abs(v))))
      throw new Error(`element ${i}: got ${got[i]}, expected ${v}`);
  });
};
const RUNS = { numRuns: 30 };

describe('forward values against references', () => {
  it('unary ops', () =>
    fc.assert(
      fc.property(
        shapeArb(0, 3).chain((s) => valuesFor(s, 0.1, 3)),
        (a) => {
          const r = ref(a);
          const map = (f: (v: number) => number): Ref => new Ref(r.shape, r.values.map(f));
          const sig = (v: number): number => 1 / (1 + Math.exp(-v));
          expectClose(T.sqrt(f64(a)), map(Math.sqrt));
          expectClose(
            T.rsqrt(f64(a)),
            map((v) => v ** -0.5),
          );
          expectClose(T.log(f64(a)), map(Math.log));
          expectClose(
            T.sigmoid(T.neg(f64(a))),
            map((v) => sig(-v)),
          );
          expectClose(
            T.silu(f64(a)),
            map((v) => v * sig(v)),
          );
          expectClose(
            T.gelu(f64(a)),
            map((v) => 0.5 * v * (1 + Math.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))),
          );
          expectClose(
            T.abs(T.neg(f64(a))),
            map((v) => v),
          );
          expectClose(
            T.relu(T.sub(f64(a), 1)),
            map((v) => Math.max(v - 1, 0)),
          );
        },
      ),
      RUNS,
    ));

  it('binary ops broadcast by NumPy rules', () =>
    fc.assert(
      fc.property(
        broadcastPairArb().chain(([s1, s2]) => fc.tuple(valuesFor(s1, 0.5, 2), valuesFor(s2, 0.5, 2, 0.0002))),
        ([a, b]) => {
          const out = T.broadcastShapes('t', a.shape, b.shape);
          const ra = ref(a);
          const rb = ref(b);
          const expected = (f: (x: number, y: number) => number): Ref =>
            Ref.fill(out, (i) => f(ra.atBroadcast(i), rb.atBroadcast(i)));
          expectClose(
            T.sub(f64(a), f64(b)),
            expected((x, y) => x - y),
          );
          expectClose(
            T.div(f64(a), f64(b)),
            expected((x, y) => x / y),
          );
          expectClose(
            T.pow(f64(a), f64(b)),
            expected((x, y) => x ** y),
          );
          expectClose(T.maximum(f64(a), f64(b)), expected(Math.max));
          expectClose(
            T.less(f64(a), f64(b)),
            expected((x, y) => (x < y ? 1 : 0)),
          );
          expectClose(
            T.where(T.greater(f64(a), 1), f64(a), f64(b)),
            expected((x, y) => (x > 1 ? x : y)),
          );
        },
      ),
      RUNS,
    ));

  it('reductions over axes with keepdims; logsumexp is stable at large values', () =>
    fc.assert(
      fc.property(
        shapeArb(1, 3).chain((s) =>
          fc.tuple(distinctValuesFor(s), fc.subarray([...s.keys()], { minLength: 1 }), fc.boolean()),
        ),
        ([a, axes, keep]) => {
          const r = ref(a);
          const outShape = a.shape.flatMap((d, i) => (axes.includes(i) ? (keep ? [1] : []) : [d]));
          const groups = (idxOut: number[]): number[] => {
            // Enumerate the input elements that reduce into this output element.
            const base = keep ? idxOut : expandIdx(idxOut, a.shape, axes);
            const vals: number[] = [];
            Ref.fill(
              axes.map((ax) => a.shape[ax]!),
              (sub) => {
                const idx = [...base];
                axes.forEach((ax, j) => (idx[ax] = sub[j]!));
                vals.push(r.at(idx));
                return 0;
              },
            );
            return vals;
          };
          expectClose(
            T.sum(f64(a), axes, keep),
            Ref.fill(outShape, (i) => groups(i).reduce((s, v) => s + v, 0)),
          );
          expectClose(
            T.max(f64(a), axes, keep),
            Ref.fill(outShape, (i) => Math.max(...groups(i))),
          );
          expectClose(
            T.mean(f64(a), axes, keep),
            Ref.fill(outShape, (i) => groups(i).reduce((s, v) => s + v, 0) / groups(i).length),
          );
          const big = T.add(f64(a), 1000);
          expectClose(
            T.logsumexp(big, axes, keep),
            Ref.fill(outShape, (i) => {
              const g = groups(i);
              const m = Math.max(...g);
              return 1000 + m + Math.log(g.reduce((s, v) => s + Math.exp(v - m), 0));
            }),
          );
        },
      ),
      RUNS,
    ));

  it('batched matmul with transposes', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(
            fc.integer({ min: 1, max: 5 }),
            fc.integer({ min: 1, max: 5 }),
            fc.integer({ min: 1, max: 5 }),
            broadcastPairArb(2),
            fc.boolean(),
            fc.boolean(),
          )
          .chain(([m, k, n, [ba, bb], ta, tb]) =>
            fc.tuple(
              valuesFor([...ba, ...(ta ? [k, m] : [m, k])]),
              valuesFor([...bb, ...(tb ? [n, k] : [k, n])]),
              fc.constant({ m, k, n, ta, tb }),
            ),
          ),
        ([a, b, { m, k, n, ta, tb }]) => {
          const batch = T.broadcastShapes('t', a.shape.slice(0, -2), b.shape.slice(0, -2));
          const ra = ref(a);
          const rb = ref(b);
          const expected = Ref.fill([...batch, m, n], (idx) => {
            const bi = idx.slice(0, -2);
            const [i, j] = idx.slice(-2) as [number, number];
            let s = 0;
            for (let kk = 0; kk < k; kk++)
              s +=
                ra.atBroadcast([...bi, ...(ta ? [kk, i] : [i, kk])]) *
                rb.atBroadcast([...bi, ...(tb ? [j, kk] : [kk, j])]);
            return s;
          });
          expectClose(T.matmul(f64(a), f64(b), { transA: ta, transB: tb }), expected, 1e-12);
        },
      ),
      RUNS,
    ));

  it('permute, slice, pad, concat', () =>
    fc.assert(
      fc.property(
        shapeArb(1, 3).chain((s) =>
          fc.tuple(
            valuesFor(s),
            fc.shuffledSubarray([...s.keys()], { minLength: s.length, maxLength: s.length }),
            fc.integer({ min: 0, max: s.length - 1 }),
          ),
        ),
        ([a, perm, axis]) => {
          const r = ref(a);
          expectClose(
            T.permute(f64(a), perm),
            Ref.fill(
              perm.map((p) => a.shape[p]!),
              (idx) => r.at(a.shape.map((_, d) => idx[perm.indexOf(d)]!)),
            ),
          );
          const begin = a.shape.map((d) => Math.floor(d / 2));
          const size = a.shape.map((d, i) => d - begin[i]!);
          expectClose(
            T.slice(f64(a), begin, size),
            Ref.fill(size, (idx) => r.at(idx.map((v, i) => v + begin[i]!))),
          );
          const padded = a.shape.map((d) => d + 2);
          expectClose(
            T.pad(
              f64(a),
              a.shape.map(() => 1),
              padded,
            ),
            Ref.fill(padded, (idx) =>
              idx.every((v, i) => v >= 1 && v <= a.shape[i]!) ? r.at(idx.map((v) => v - 1)) : 0,
            ),
          );
          const cat = a.shape.map((d, i) => (i === axis ? 2 * d : d));
          expectClose(
            T.concat([f64(a), T.neg(f64(a))], axis),
            Ref.fill(cat, (idx) =>
              idx[axis]! < a.shape[axis]! ? r.at(idx) : -r.at(idx.map((v, i) => (i === axis ? v - a.shape[axis]! : v))),
            ),
          );
        },
      ),
      RUNS,
    ));

  it('gather, takeAlongAxis and their adjoints', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 1, max: 5 }), fc.integer({ min: 1, max: 3 }))
          .chain(([b, v, d]) =>
            fc.tuple(
              valuesFor([b, v, d]),
              fc.array(fc.integer({ min: 0, max: v - 1 }), { minLength: b * d, maxLength: b * d }),
              fc.array(fc.integer({ min: 0, max: v - 1 }), { minLength: 1, maxLength: 6 }),
            ),
          ),
        ([a, picks, ids]) => {
          const [b, v, d] = a.shape as [number, number, number];
          const r = ref(a);
          const idT = T.tensor(ids, [ids.length], { dtype: 'i32' });
          expectClose(
            T.gather(f64(a), idT, 1),
            Ref.fill([b, ids.length, d], ([i, j, k]) => r.at([i!, ids[j!]!, k!])),
          );
          const pickT = T.tensor(picks, [b, 1, d], { dtype: 'i32' });
          expectClose(
            T.takeAlongAxis(f64(a), pickT, 1),
            Ref.fill([b, 1, d], ([i, , k]) => r.at([i!, picks[i! * d + k!]!, k!])),
          );
          const upd = T.ones([b, ids.length, d], { dtype: 'f64' });
          expectClose(
            T.scatterAdd(upd, idT, 1, [b, v, d]),
            Ref.fill([b, v, d], ([, j]) => ids.filter((x) => x === j).length),
          );
        },
      ),
      RUNS,
    ));

  it('softmax, logSoftmax, rmsNorm, layerNorm, crossEntropy', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 2, max: 6 }))
          .chain(([rows, d]) =>
            fc.tuple(
              valuesFor([rows, d], -30, 30),
              valuesFor([d], 0.5, 1.5),
              fc.array(fc.integer({ min: 0, max: d - 1 }), { minLength: rows, maxLength: rows }),
            ),
          ),
        ([a, w, targets]) => {
          const [rows, d] = a.shape as [number, number];
          const r = ref(a);
          const row = (i: number): number[] => Array.from({ length: d }, (_, j) => r.at([i, j]));
          const lse = (xs: number[]): number => {
            const m = Math.max(...xs);
            return m + Math.log(xs.reduce((s, x) => s + Math.exp(x - m), 0));
          };
          expectClose(
            T.softmax(f64(a)),
            Ref.fill([rows, d], ([i, j]) => Math.exp(r.at([i!, j!]) - lse(row(i!)))),
          );
          expectClose(
            T.logSoftmax(f64(a), 1),
            Ref.fill([rows, d], ([i, j]) => r.at([i!, j!]) - lse(row(i!))),
          );
          const eps = 1e-5;
          expectClose(
            T.rmsNorm(f64(a), f64(w), eps),
            Ref.fill([rows, d], ([i, j]) => {
              const ms = row(i!).reduce((s, x) => s + x * x, 0) / d;
              return (r.at([i!, j!]) / Math.sqrt(ms + eps)) * w.values[j!]!;
            }),
            1e-10,
          );
          expectClose(
            T.layerNorm(f64(a), f64(w), T.zeros([d], { dtype: 'f64' }), eps),
            Ref.fill([rows, d], ([i, j]) => {
              const xs = row(i!);
              const mu = xs.reduce((s, x) => s + x, 0) / d;
              const vr = xs.reduce((s, x) => s + (x - mu) ** 2, 0) / d;
              return ((r.at([i!, j!]) - mu) / Math.sqrt(vr + eps)) * w.values[j!]!;
            }),
            1e-10,
          );
          const ce = T.crossEntropy(f64(a), T.tensor(targets, [rows], { dtype: 'i32' }));
          expect(
            Math.abs(ce.itemSync() - targets.reduce((s, t, i) => s + lse(row(i)) - r.at([i, t]), 0) / rows),
          ).toBeLessThan(1e-10);
        },
      ),
      RUNS,
    ));

  it('causal attention against a per-query loop', () =>
    fc.assert(
      fc.property(
        fc
          .tuple(fc.integer({ min: 1, max: 4 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 1, max: 3 }))
          .chain(([tq, extra, d]) =>
            fc.tuple(valuesFor([tq, d]), valuesFor([tq + extra, d]), valuesFor([tq + extra, d])),
          ),
        ([q, k, v]) => {
          const [tq, d] = q.shape as [number, number];
          const tk = k.shape[0]!;
          const [rq, rk, rv] = [ref(q), ref(k), ref(v)];
          const expected = Ref.fill([tq, d], ([i, c]) => {
            const visible = Array.from({ length: i! + tk - tq + 1 }, (_, j) => j);
            const scores = visible.map(
              (j) =>
                Array.from({ length: d }, (_, e) => rq.at([i!, e]) * rk.at([j, e])).reduce((s, x) => s + x, 0) /
                Math.sqrt(d),
            );
            const m = Math.max(...scores);
            const z = scores.reduce((s, x) => s + Math.exp(x - m), 0);
            return visible.reduce((s, j, n) => s + (Math.exp(scores[n]! - m) / z) * rv.at([j, c!]), 0);
          });
          const bthd = (a: Arg): T.Tensor => T.reshape(f64(a), [1, a.shape[0]!, 1, a.shape[1]!]);
          expectClose(T.reshape(T.causalAttention(bthd(q), bthd(k), bthd(v)), [tq, d]), expected, 1e-10);
        },
      ),
      RUNS,
    ));
});

/** Re-insert reduced axes (as 0) into an output index computed without keepdims. */
function expandIdx(idxOut: number[], shape: readonly number[], axes: number[]): number[] {
  let k = 0;
  return shape.map((_, i) => (axes.includes(i) ? 0 : idxOut[k++]!));
}
