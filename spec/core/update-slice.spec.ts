import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';

/**
 * `updateSlice` (JAX's dynamic_update_slice with buffer donation) on the CPU backend: values against a plain
 * loop written here; the donation contract (in place when the donated handle is the only reference to its
 * storage, a copy that leaves the storage intact when a view or a tape shares it, the handle consumed either
 * way); and `causalAttention`'s keyLength, which the preallocated KV cache attends with: bit for bit the
 * attention over the first keyLength rows, whatever the other rows hold.
 */
const RUNS = { numRuns: 30 };

/** Row-major coordinates of flat index i in shape. */
const coords = (shape: readonly number[], i: number): number[] => {
  const c: number[] = [];
  for (let a = shape.length - 1; a >= 0; a--) {
    c.unshift(i % shape[a]!);
    i = Math.floor(i / shape[a]!);
  }
  return c;
};

/** out = dst, then out[begin + c] = src[c] for every coordinate c of src (a plain loop). */
function updateRef(dst: number[], shape: number[], src: number[], srcShape: number[], begin: number[]): number[] {
  const out = [...dst];
  const strides = shape.map((_, a) => shape.slice(a + 1).reduce((p, n) => p * n, 1));
  src.forEach((x, i) => {
    const c = coords(srcShape, i);
    out[c.reduce((s, ci, a) => s + (ci + begin[a]!) * strides[a]!, 0)] = x;
  });
  return out;
}

/** A destination shape, an update shape that fits, and where it goes. */
const caseArb = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 }).chain((shape) =>
  fc.tuple(...shape.map((n) => fc.integer({ min: 1, max: n }))).chain((sub) =>
    fc.record({
      shape: fc.constant(shape),
      srcShape: fc.constant(sub),
      begin: fc.tuple(...shape.map((n, a) => fc.integer({ min: 0, max: n - sub[a]! }))),
    }),
  ),
);

const normals = (rng: T.Rng, n: number): number[] => Array.from({ length: n }, () => rng.normal());

const filled = (shape: readonly number[], from: number): T.Tensor =>
  T.tensor(
    Array.from({ length: shape.reduce((p, n) => p * n, 1) }, (_, i) => from + i),
    [...shape],
  );

describe('updateSlice', () => {
  it('writes the update at begin, in place when the donated tensor is the only reference', () => {
    fc.assert(
      fc.property(caseArb, ({ shape, srcShape, begin }) => {
        T.tidy(() => {
          const dst = filled(shape, 0);
          const src = filled(srcShape, 1000);
          const want = updateRef([...dst.dataSync()], shape, [...src.dataSync()], srcShape, begin);
          const storage = dst.storageFor('spec');
          const out = T.updateSlice(dst, src, begin);
          expect([...out.dataSync()]).toEqual(want);
          expect(out.storageFor('spec'), 'the output took over the donated storage').toBe(storage);
          expect(dst.isDisposed, 'the donated handle is consumed').toBe(true);
          expect(() => T.neg(dst)).toThrow(T.DisposedTensorError);
        });
      }),
      RUNS,
    );
  });

  it('copies when a view shares the storage: the view keeps the old values, the handle is still consumed', () => {
    fc.assert(
      fc.property(caseArb, ({ shape, srcShape, begin }) => {
        T.tidy(() => {
          const dst = filled(shape, 0);
          const before = [...dst.dataSync()];
          const view = T.reshape(dst, [...shape, 1]); // a new handle (a same-shape reshape is dst itself)
          const src = filled(srcShape, 1000);
          const out = T.updateSlice(dst, src, begin);
          expect([...out.dataSync()]).toEqual(updateRef(before, shape, [...src.dataSync()], srcShape, begin));
          expect(out.storageFor('spec')).not.toBe(view.storageFor('spec'));
          expect([...view.dataSync()], 'the sharing view is left intact').toEqual(before);
          expect(dst.isDisposed).toBe(true);
        });
      }),
      RUNS,
    );
  });

  it('copies a tensor a tape tracks, and refuses to be differentiated', () => {
    const x = T.tensor([1, 2, 3, 4], [4]);
    const u = T.tensor([9], [1]);
    expect(() => T.grad((a: T.Tensor) => T.sum(T.updateSlice(T.mul(a, 1), u, [1])))(x)).toThrow(
      T.NotDifferentiableError,
    );
    expect(() => T.grad((a: T.Tensor) => T.sum(T.updateSlice(T.tensor([0, 0, 0, 0], [4]), a, [0])))(x)).toThrow(
      T.NotDifferentiableError,
    );
    // A tracked input is never written in place: its old values stay for the tape.
    T.grad((a: T.Tensor) => {
      const keep = a.storageFor('spec');
      const before = [...a.dataSync()];
      const out = T.updateSlice(a, u, [0]);
      expect(out.storageFor('spec')).not.toBe(keep);
      expect([...T.stopGradient(T.mul(a, 1)).dataSync()]).toEqual(before);
      return T.sum(T.mul(a, 1));
    })(x);
    T.dispose([x, u]);
  });

  it('rejects an update that does not fit, of another rank or dtype', () => {
    T.tidy(() => {
      const dst = T.zeros([2, 3]);
      expect(() => T.updateSlice(dst, T.zeros([1, 2]), [1, 2])).toThrow(T.ShapeError);
      expect(() => T.updateSlice(dst, T.zeros([2]), [0])).toThrow(T.ShapeError);
      expect(() => T.updateSlice(dst, T.zeros([1, 1]), [0, 0.5])).toThrow(T.ShapeError);
      expect(() => T.updateSlice(dst, T.zeros([1, 1], { dtype: 'i32' }), [0, 0])).toThrow(T.DTypeError);
      expect(dst.isDisposed, 'a refused call consumes nothing').toBe(false);
    });
  });
});

describe('causalAttention keyLength', () => {
  const dimsArb = fc.record({
    b: fc.integer({ min: 1, max: 2 }),
    tq: fc.integer({ min: 1, max: 3 }),
    extra: fc.integer({ min: 0, max: 2 }),
    spare: fc.integer({ min: 1, max: 3 }),
    hkv: fc.integer({ min: 1, max: 2 }),
    group: fc.integer({ min: 1, max: 2 }),
    d: fc.integer({ min: 1, max: 3 }),
    seed: fc.integer({ min: 0, max: 1000 }),
    pad: fc.boolean(),
  });

  it('equals attention over the first keyLength rows bit for bit; the rows after them are never read', () => {
    fc.assert(
      fc.property(dimsArb, (x) => {
        T.tidy(() => {
          const rng = new T.Rng(x.seed);
          const len = x.tq + x.extra;
          const cap = len + x.spare;
          const hq = x.hkv * x.group;
          const q = T.tensor(normals(rng, x.b * x.tq * hq * x.d), [x.b, x.tq, hq, x.d], { dtype: 'f32' });
          const rows = (n: number): Float32Array => Float32Array.from(normals(rng, n));
          const kv = [rows(x.b * len * x.hkv * x.d), rows(x.b * len * x.hkv * x.d)];
          // Row j < len of a batch row: padding on the first key when `pad`; rows from len on hold NaN.
          const biasAt = (j: number): number => (j >= len ? Number.NaN : x.pad && j === 0 ? -1e9 : 0);
          const exact = kv.map((a) => T.tensor(a, [x.b, len, x.hkv, x.d], { dtype: 'f32' }));
          const exactBias = T.tensor(
            Array.from({ length: x.b * len }, (_, i) => biasAt(i % len)),
            [x.b, len],
            { dtype: 'f32' },
          );
          const cappedOf = (a: Float32Array): T.Tensor => {
            const out = new Float32Array(x.b * cap * x.hkv * x.d).fill(Number.NaN);
            const row = len * x.hkv * x.d;
            for (let bi = 0; bi < x.b; bi++) out.set(a.subarray(bi * row, (bi + 1) * row), bi * cap * x.hkv * x.d);
            return T.tensor(out, [x.b, cap, x.hkv, x.d], { dtype: 'f32' });
          };
          const capped = kv.map(cappedOf);
          const cappedBias = T.tensor(
            Array.from({ length: x.b * cap }, (_, i) => biasAt(i % cap)),
            [x.b, cap],
            { dtype: 'f32' },
          );
          const want = T.causalAttention(q, exact[0]!, exact[1]!, { keyBias: exactBias }).dataSync();
          const got = T.causalAttention(q, capped[0]!, capped[1]!, { keyBias: cappedBias, keyLength: len });
          expect([...got.dataSync()]).toEqual([...want]);
        });
      }),
      RUNS,
    );
  });

  it('refuses a keyLength beyond the rows or below the queries, and its gradient', () => {
    T.tidy(() => {
      const q = T.zeros([1, 2, 1, 2]);
      const k = T.zeros([1, 4, 1, 2]);
      expect(() => T.causalAttention(q, k, k, { keyLength: 5 })).toThrow(T.ArgumentError);
      expect(() => T.causalAttention(q, k, k, { keyLength: 1 })).toThrow(T.ShapeError);
      expect(() => T.grad((a: T.Tensor) => T.sum(T.causalAttention(a, k, k, { keyLength: 3 })))(q)).toThrow(
        T.NotDifferentiableError,
      );
    });
  });
});
