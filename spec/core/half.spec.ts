import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { reference } from '../helpers/compare.js';

/**
 * bf16/f16 storage for frozen weights: rounding against hand-worked bit patterns, exact widening, the kernels that
 * read it (matmul's B, gather, cast) bit for bit against the same op on the weight widened to f32 beforehand (on
 * the reference backend and the CPU backend on 1 and 2 threads, every GEMM split), gradients through it, the
 * memory counters, and the refusals of every other op.
 */
const cpu1 = new T.CpuBackend({ threads: 1 });
const cpu2 = new T.CpuBackend({ threads: 2, minParallelWork: 0 });
await cpu2.whenReady();
const BACKENDS: [string, T.Backend][] = [
  ['reference', reference],
  ['cpu, 1 thread', cpu1],
  ['cpu, 2 threads', cpu2],
];
const HALVES = ['bf16', 'f16'] as const;

const fromBits = (b: number): number => new Float32Array(new Uint32Array([b]).buffer)[0]!;
const hex = (xs: ArrayLike<number>): string[] => Array.from(xs, (x) => x.toString(16));
/** Bit patterns of f32 results: NaN payloads, -0 and every last bit compared (never copied through a JS number). */
const bitsOf = (xs: ArrayLike<number>): number[] =>
  Array.from(new Uint32Array((xs instanceof Float32Array ? xs.slice() : Float32Array.from(xs)).buffer));

/** A deterministic stream of values in [-2, 2), with a few special weights mixed in where asked. */
function values(n: number, seed: number, specials = false): number[] {
  let s = seed * 2654435761 + 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push((s / 2 ** 32) * 4 - 2);
  }
  // -0, a bf16 and an f16 subnormal, a value past f16's range (rounds to infinity there): each kernel must widen them
  // exactly as the host does.
  if (specials && n >= 8) [out[1], out[3], out[5], out[7]] = [-0, 3e-39, 3e-6, 7e4];
  return out;
}

describe('rounding to bf16 and f16, nearest with ties to even (as torch .to())', () => {
  it('bf16: hand-worked patterns, ties, overflow, NaN, subnormals', () => {
    const cases: [number, number][] = [
      [0x3f800000, 0x3f80], // 1
      [0x3f808000, 0x3f80], // 1 + 2^-8: a tie, 0x3f80 is even
      [0x3f818000, 0x3f82], // 1 + 3 2^-8: a tie, up to the even 0x3f82
      [0x3f808001, 0x3f81], // just past the tie
      [0x3f817fff, 0x3f81], // just below the next tie
      [0xbf808000, 0xbf80], // negative tie
      [0x7f7fffff, 0x7f80], // the largest f32 rounds to infinity
      [0x7f800000, 0x7f80],
      [0xff800000, 0xff80],
      [0x80000000, 0x8000], // -0
      [0x7fc00001, 0x7fc0], // NaN: the quiet NaN 0x7fc0
      [0x7f800001, 0x7fc0], // a signalling NaN too
      [0xffc00000, 0x7fc0], // and a negative one
      [0x00010000, 0x0001], // the smallest bf16 subnormal
      [0x00008000, 0x0000], // half of it: a tie, down to the even 0
      [0x00018000, 0x0002], // one and a half: a tie, up to 2
    ];
    expect(hex(cases.map(([b]) => T.roundBf16(fromBits(b))))).toEqual(hex(cases.map(([, w]) => w)));
  });

  it('f16: hand-worked patterns, ties, overflow, NaN, subnormals and the subnormal-to-normal carry', () => {
    const u = 2 ** -24; // the f16 subnormal unit
    const cases: [number, number][] = [
      [1, 0x3c00],
      [-2, 0xc000],
      [0.1, 0x2e66],
      [1 + 2 ** -11, 0x3c00], // a tie, 0x3c00 is even
      [1 + 3 * 2 ** -11, 0x3c02], // a tie, up to the even 0x3c02
      [1 + 2 ** -11 + 2 ** -23, 0x3c01], // just past the tie
      [65504, 0x7bff], // the largest f16
      [65519.99, 0x7bff],
      [65520, 0x7c00], // the tie above it goes to the even neighbour, infinity
      [1e6, 0x7c00],
      [-Infinity, 0xfc00],
      [NaN, 0x7e00],
      [fromBits(0xffc00000), 0xfe00], // a negative NaN keeps its sign
      [-0, 0x8000],
      [2 ** -14, 0x0400], // the smallest normal
      [1023 * u, 0x03ff], // the largest subnormal
      [1023.5 * u, 0x0400], // a tie between 1023 (odd) and 1024 units: carries into the normal range
      [u, 0x0001], // the smallest subnormal
      [u / 2, 0x0000], // a tie between 0 and 1 unit: down to the even 0
      [1.5 * u, 0x0002], // a tie between 1 and 2 units: up to 2
      [u / 2 + 2 ** -40, 0x0001], // just past the tie
      [-u, 0x8001],
      [2 ** -26, 0x0000],
      [fromBits(0x00000001), 0x0000], // an f32 subnormal
    ];
    expect(hex(cases.map(([x]) => T.roundF16(x)))).toEqual(hex(cases.map(([, w]) => w)));
  });

  it('widening is exact: every non-NaN word of both dtypes rounds back to itself; hand-worked values', () => {
    for (const dtype of HALVES) {
      const words = new Uint16Array(65536).map((_, i) => i);
      const wide = T.widenHalf(dtype, words);
      const back = T.roundToHalf(dtype, wide);
      const bad = [...words].filter((w, i) => !Number.isNaN(wide[i]!) && back[i] !== w);
      expect(bad, dtype).toEqual([]);
      // NaNs stay NaN (payloads are the shifted f16/bf16 ones)
      expect([...words].filter((_, i) => Number.isNaN(wide[i]!)).length, dtype).toBe(dtype === 'bf16' ? 254 : 2046);
    }
    expect([T.bf16Value(0x3f80), T.bf16Value(0xc049), T.bf16Value(0x0001), T.bf16Value(0xff80)]).toEqual([
      1,
      -3.140625,
      2 ** -133,
      -Infinity,
    ]);
    expect([
      T.f16Value(0x3c00),
      T.f16Value(0x0001),
      T.f16Value(0x03ff),
      T.f16Value(0x7bff),
      T.f16Value(0xfc00),
    ]).toEqual([1, 2 ** -24, 1023 * 2 ** -24, 65504, -Infinity]);
    // NaN payloads widen as bits (0xfd01 is a signalling NaN, which a JS number would quiet).
    expect(hex(bitsOf(T.widenHalf('f16', new Uint16Array([0x7e00, 0xfd01]))))).toEqual(hex([0x7fc00000, 0xffa02000]));
    expect(hex(bitsOf(T.widenHalf('bf16', new Uint16Array([0x7fc1, 0xff81]))))).toEqual(hex([0x7fc10000, 0xff810000]));
  });
});

describe.each(BACKENDS)('bf16/f16 storage on %s', (_name, backend) => {
  it('tensor() rounds f32 values, fromHalfBits keeps the words; data() reads them widened; 2 bytes per element', async () => {
    for (const dtype of HALVES) {
      const vals = values(37, 1, true);
      const before = backend.memory();
      const t = T.tensor(vals, [37], { dtype, backend });
      expect(t.bytes).toBe(74);
      expect(backend.memory().bytes - before.bytes).toBe(74);
      expect(backend.memory().buffers - before.buffers).toBe(1);
      const got = await t.data();
      expect(got).toBeInstanceOf(Float32Array);
      expect(bitsOf(got)).toEqual(bitsOf(T.widenHalf(dtype, T.roundToHalf(dtype, vals))));
      const words = new Uint16Array([0x3f80, 0x7e01, 0x0001, 0x8000, 0xfbff]);
      const w = T.fromHalfBits(words, [5], dtype, { backend });
      expect(bitsOf(w.dataSync())).toEqual(bitsOf(T.widenHalf(dtype, words)));
      // full() of a value holds the rounded value (1 + 3 2^-8 is a bf16 tie, up to 1 + 2^-6; exact in f16).
      const filled = T.full([3], 1 + 3 * 2 ** -8, { dtype, backend });
      expect(Array.from(filled.dataSync())).toEqual(Array(3).fill(dtype === 'bf16' ? 1 + 2 ** -6 : 1 + 3 * 2 ** -8));
      T.dispose([t, w, filled]);
      expect(backend.memory()).toEqual(before);
    }
  });

  it('matmul with a bf16/f16 B equals the f32 matmul of B widened first, bit for bit (GEMM panel edges)', () => {
    // M: below, at and past the micro-tile's 4 rows; N: around its 8 columns and past a 512-column block; K:
    // around 4 (the transposed packer's blocks) and 256 (one K block).
    const shapes: [number, number, number][] = [
      [1, 1, 1],
      [3, 7, 5],
      [4, 8, 4],
      [5, 9, 3],
      [17, 23, 31],
      [2, 513, 9],
      [6, 16, 255],
      [9, 12, 256],
      [5, 11, 257],
    ];
    for (const dtype of HALVES) {
      for (const [m, n, k] of shapes) {
        for (const transB of [false, true]) {
          for (const transA of [false, true]) {
            T.tidy(() => {
              const x = T.tensor(values(m * k, m + k), transA ? [k, m] : [m, k], { backend });
              const words = T.roundToHalf(dtype, values(k * n, n, true));
              const wShape = transB ? [n, k] : [k, n];
              const half = T.fromHalfBits(words, wShape, dtype, { backend });
              const wide = T.tensor(T.widenHalf(dtype, words), wShape, { backend });
              const got = T.matmul(x, half, { transA, transB }).dataSync();
              const want = T.matmul(x, wide, { transA, transB }).dataSync();
              expect(bitsOf(got), `${dtype} m${m} n${n} k${k} transA ${transA} transB ${transB}`).toEqual(bitsOf(want));
            });
          }
        }
      }
    }
    if (backend instanceof T.CpuBackend) expect(T.fallbackCounts(backend).matmul).toBeUndefined();
  });

  it('every one of the 65536 words widens exactly in matmul (each B packing path) and in gather', () => {
    // A one-hot row of A picks the row (or column) of B that holds every word; the rest of B is zeros, so each output
    // is 0 + ... + w + ... + 0: w itself, but -0 (which the sum makes +0) and NaN (any NaN).
    const canon = (xs: Float32Array): number[] => bitsOf(xs).map((b, i) => (Number.isNaN(xs[i]!) ? -1 : b));
    const n = 65536;
    const row = new Uint16Array(n).map((_, i) => i);
    // [B layout, k, the k index holding the words]: B [k, n] (8-column panels, one edge panel of 3 columns when n
    // is not a multiple of 8), B^T [n, k] with k = 4 (4 x 4 transposed blocks) and k = 5 (the scalar tail).
    const layouts = [
      { transB: false, n: n + 3, k: 4, at: 0 },
      { transB: true, n, k: 4, at: 0 },
      { transB: true, n, k: 5, at: 4 },
    ];
    for (const dtype of HALVES) {
      const want = canon(T.widenHalf(dtype, row)).map((b) => (b === 0x80000000 ? 0 : b));
      T.tidy(() => {
        for (const { transB, n: cols, k, at } of layouts) {
          const words = new Uint16Array(k * cols);
          for (let j = 0; j < cols; j++) words[transB ? j * k + at : at * cols + j] = row[j % n]!;
          const b = T.fromHalfBits(words, transB ? [cols, k] : [k, cols], dtype, { backend });
          const a = T.tensor(
            Array.from({ length: k }, (_, i) => (i === at ? 1 : 0)),
            [1, k],
            { backend },
          );
          const got = canon(T.matmul(a, b, { transB }).dataSync() as Float32Array);
          expect(got.slice(0, n), `${dtype} transB ${transB} k ${k}`).toEqual(want);
        }
        // Panels narrower than 8 columns all through (the packer's general path): B [m, 1, 7], a batch of rows.
        const m = Math.ceil(n / 7);
        const narrow = T.fromHalfBits(
          new Uint16Array(m * 7).map((_, i) => i % n),
          [m, 1, 7],
          dtype,
          { backend },
        );
        const got = canon(T.matmul(T.tensor([1], [1, 1], { backend }), narrow).dataSync() as Float32Array);
        expect(got.slice(0, n), `${dtype} [m, 1, 7]`).toEqual(want);
        const table = T.fromHalfBits(row, [n, 1], dtype, { backend });
        const ids = T.tensor(
          Int32Array.from({ length: n }, (_, i) => n - 1 - i),
          [n],
          { backend },
        );
        const rows = T.gather(table, ids, 0).dataSync() as Float32Array;
        // (A NaN read through a JS number is quieted, as an f32 gather's would be: NaNs compare as NaN.)
        expect(canon(rows)).toEqual(canon(T.widenHalf(dtype, row.slice().reverse())));
      });
    }
  });

  it('batched matmul: a batch of activations times a 2-D weight, and a batched B broadcast over a', () => {
    for (const dtype of HALVES) {
      T.tidy(() => {
        const x = T.tensor(values(2 * 3 * 5 * 9, 3), [2, 3, 5, 9], { backend });
        const w2 = T.roundToHalf(dtype, values(7 * 9, 4, true));
        const wb = T.roundToHalf(dtype, values(2 * 1 * 9 * 6, 5, true));
        for (const [words, shape, transB] of [
          [w2, [7, 9], true],
          [wb, [2, 1, 9, 6], false],
        ] as const) {
          const got = T.matmul(x, T.fromHalfBits(words, shape, dtype, { backend }), { transB }).dataSync();
          const wide = T.tensor(T.widenHalf(dtype, words), [...shape], { backend });
          expect(bitsOf(got), `${dtype} [${shape}]`).toEqual(bitsOf(T.matmul(x, wide, { transB }).dataSync()));
        }
      });
    }
    if (backend instanceof T.CpuBackend) expect(T.fallbackCounts(backend).matmul).toBeUndefined();
  });

  it('gather (embedding rows, odd widths, any axis) and cast to f32 equal those of the widened tensor', () => {
    T.resetFallbackCounts(backend);
    for (const dtype of HALVES) {
      T.tidy(() => {
        const words = T.roundToHalf(dtype, values(11 * 7, 6, true));
        const half = T.fromHalfBits(words, [11, 7], dtype, { backend });
        const wide = T.tensor(T.widenHalf(dtype, words), [11, 7], { backend });
        const ids = T.tensor(new Int32Array([3, 0, 10, 3, 7, 1]), [2, 3], { backend });
        const rows = T.gather(half, ids, 0);
        expect(rows.dtype).toBe('f32');
        expect(rows.shape).toEqual([2, 3, 7]);
        expect(bitsOf(rows.dataSync())).toEqual(bitsOf(T.gather(wide, ids, 0).dataSync()));
        // Along axis 0 the CPU copies rows itself, widening them: no reference kernel ran.
        expect(T.fallbackCounts(backend).gather).toBeUndefined();
        const cols = T.tensor(new Int32Array([6, 0, 2]), [3], { backend });
        expect(bitsOf(T.gather(half, cols, 1).dataSync())).toEqual(bitsOf(T.gather(wide, cols, 1).dataSync()));
        const cast = T.cast(half, 'f32');
        expect(cast.dtype).toBe('f32');
        expect(bitsOf(cast.dataSync())).toEqual(bitsOf(wide.dataSync()));
        T.resetFallbackCounts(backend);
      });
    }
  });

  it('gradients through a frozen bf16/f16 weight equal those through the widened weight, bit for bit', () => {
    for (const dtype of HALVES) {
      T.tidy(() => {
        const words = T.roundToHalf(
          dtype,
          values(6 * 5, 7, true).map((v) => (Math.abs(v) > 100 ? 1 : v)),
        );
        const embWords = T.roundToHalf(dtype, values(4 * 5, 8));
        const frozen = {
          w: T.fromHalfBits(words, [6, 5], dtype, { backend }),
          emb: T.fromHalfBits(embWords, [4, 5], dtype, { backend }),
        };
        const widened = {
          w: T.tensor(T.widenHalf(dtype, words), [6, 5], { backend }),
          emb: T.tensor(T.widenHalf(dtype, embWords), [4, 5], { backend }),
        };
        const params = {
          x: T.tensor(values(3 * 5, 9), [3, 5], { backend }),
          xt: T.tensor(values(6 * 3, 10), [6, 3], { backend }),
          bias: T.tensor(values(6, 11), [6], { backend }),
        };
        const ids = T.tensor(new Int32Array([2, 0, 3]), [3], { backend });
        const loss = (p: typeof params, w: typeof frozen): T.Tensor => {
          const h = T.add(p.x, T.gather(w.emb, ids, 0)); // [3, 5]
          const y = T.add(T.matmul(h, w.w, { transB: true }), p.bias); // x W^T: the linear layer, [3, 6]
          const z = T.matmul(y, w.w); // dY W, the backward's product (transB false), [3, 5]
          const u = T.matmul(p.xt, w.w, { transA: true }); // a transposed A beside a half B, [3, 5]
          return T.add(T.sum(T.square(z)), T.sum(T.mul(u, h)));
        };
        const [v1, g1] = T.valueAndGrad(loss)(params, frozen);
        const [v2, g2] = T.valueAndGrad(loss)(params, widened);
        expect(bitsOf(v1.dataSync())).toEqual(bitsOf(v2.dataSync()));
        for (const key of ['x', 'xt', 'bias'] as const)
          expect(bitsOf(g1[key].dataSync()), `${dtype} d${key}`).toEqual(bitsOf(g2[key].dataSync()));
      });
    }
  });
});

describe('bf16/f16 tensors are refused where they cannot be read', () => {
  const backend = cpu1;
  const half = T.tensor([1, 2, 3, 4], [2, 2], { dtype: 'bf16', backend });
  const f = T.tensor([1, 2, 3, 4], [2, 2], { backend });
  const refusals: [string, () => unknown][] = [
    ['add', () => T.add(half, f)],
    ['mul', () => T.mul(half, 2)],
    ['exp', () => T.exp(half)],
    ['sum', () => T.sum(half)],
    ['where', () => T.where(f, half, f)],
    ['permute', () => T.transpose(half)],
    ['softmax', () => T.softmax(half, -1)],
    ['takeAlongAxis', () => T.takeAlongAxis(half, T.tensor(new Int32Array([0, 1, 1, 0]), [2, 2], { backend }), 1)],
    ['rmsNorm', () => T.rmsNorm(f, T.tensor([1, 1], [2], { dtype: 'f16', backend }))],
    ['matmul', () => T.matmul(half, f)],
    ['matmul', () => T.matmul(T.cast(f, 'f64'), half)],
    ['cast', () => T.cast(f, 'bf16')],
    ['cast', () => T.cast(half, 'i32')],
  ];
  it.each(refusals)('%s refuses them with a DTypeError naming the op and the dtype', (op, run) => {
    let caught: unknown;
    try {
      run();
    } catch (e) {
      caught = e;
    }
    expect(caught).toBeInstanceOf(T.DTypeError);
    expect((caught as T.DTypeError).op).toBe(op);
    expect((caught as Error).message).toMatch(/bf16|f16/);
  });

  it('views read no element and take them: reshape, a no-op transpose, and so a 1-D B in matmul', () => {
    const w = T.reshape(half, [4]);
    expect(w.dtype).toBe('bf16');
    expect(T.transpose(T.reshape(half, [4, 1]), 0, 0).dtype).toBe('bf16');
    expect(Array.from(T.matmul(f, T.reshape(w, [2, 2])).dataSync())).toEqual([7, 10, 15, 22]);
    expect(Array.from(T.matmul(T.tensor([1, 1, 1, 1], [1, 4], { backend }), w).dataSync())).toEqual([10]);
  });

  it('valueAndGrad refuses a bf16/f16 leaf (no gradient flows into frozen storage), naming it', () => {
    expect(() => T.valueAndGrad((p: { w: T.Tensor }) => T.sum(T.matmul(f, p.w)))({ w: half })).toThrow(
      /valueAndGrad: leaf 0 of the differentiated argument is bf16/,
    );
    expect(() => T.vjp((w: T.Tensor) => T.matmul(f, w), half)).toThrow(T.DTypeError);
  });

  it('kernels cannot allocate half-precision outputs (only uploads make them)', () => {
    expect(() => backend.alloc('bf16', 4)).toThrow(/kernels write f32, f64 or i32, not bf16/);
    expect(() => reference.alloc('f16', 4)).toThrow(T.BackendError);
  });
});
