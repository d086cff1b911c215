import { afterEach, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { BufferPool } from '../../src/backends/webgpu/buffer-pool.js';
import { setMatmulTileConfig } from '../../src/backends/webgpu/kernels/matmul.js';
import { Tensor } from '../../src/core/tensor.js';
import { kt } from '../../src/ops/op.js';
import { fits, MATMUL_CANDIDATES, type TileConfig } from '../../src/backends/webgpu/kernels/matmul-configs.js';
import { frozenPair } from '../helpers/frozen.js';
import { describeGpu, reference } from './helpers.js';

/**
 * bf16/f16 storage on WebGPU: packed two elements per u32 word, unpacked in the shaders that read it (matmul's B
 * loads in every kernel configuration and variant, gather, cast). Each is compared bit for bit with the same op on
 * the weight widened to f32 beforehand, on this device: the half loaders put the same f32 values where the f32
 * loaders do, and the arithmetic after them is the same shader code. So is the transformer's forward with frozen
 * half matrices, and the gradients through them.
 */
const HALVES = ['bf16', 'f16'] as const;
const bitsOf = (xs: ArrayLike<number>): number[] =>
  Array.from(new Uint32Array((xs instanceof Float32Array ? xs.slice() : Float32Array.from(xs)).buffer));
/** NaNs as one value (a device may return any NaN), -0 as itself. */
const canon = (xs: Float32Array): number[] => bitsOf(xs).map((b, i) => (Number.isNaN(xs[i]!) ? -1 : b));

const m0 = (lead: number[]): number => lead.at(-1)!;

function values(n: number, seed: number): number[] {
  let s = seed * 2654435761 + 1;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 4 - 2;
  });
}

describeGpu('webgpu bf16/f16 storage', (gpu) => {
  afterEach(() => setMatmulTileConfig(null));

  it('uploads and reads back exactly (odd counts padded to a word), 2 bytes per element in memory()', async () => {
    for (const dtype of HALVES) {
      const words = new Uint16Array(65535).map((_, i) => i + 1); // odd: the last word is half padding
      const before = gpu.memory();
      const t = T.fromHalfBits(words, [65535], dtype, { backend: gpu });
      expect(gpu.memory().bytes - before.bytes).toBe(BufferPool.sizeClass(2 * 65536));
      expect(BufferPool.sizeClass(2 * 65536)).toBeLessThan(BufferPool.sizeClass(4 * 65535));
      expect(bitsOf((await t.data()) as Float32Array)).toEqual(bitsOf(T.widenHalf(dtype, words)));
      const rounded = T.tensor([1 + 3 * 2 ** -8, 0.1, -7e4], [3], { dtype, backend: gpu });
      expect(Array.from(await rounded.data())).toEqual(
        Array.from(T.widenHalf(dtype, T.roundToHalf(dtype, [1 + 3 * 2 ** -8, 0.1, -7e4]))),
      );
      T.dispose([t, rounded]);
      expect(gpu.memory()).toEqual(before);
    }
  });

  it('every one of the 65536 words widens exactly in matmul (vec4 and scalar B loads, both layouts), gather, cast', async () => {
    const n = 65536;
    const row = new Uint16Array(n).map((_, i) => i);
    // [transB, columns, k, the k index holding the words]: vec4 loads need the contiguous size a multiple of 4.
    const layouts = [
      { transB: false, cols: n, k: 4, at: 0 },
      { transB: false, cols: n + 1, k: 4, at: 3 },
      { transB: true, cols: n, k: 4, at: 1 },
      { transB: true, cols: n, k: 5, at: 4 },
    ];
    for (const dtype of HALVES) {
      const want = canon(T.widenHalf(dtype, row)).map((b) => (b === 0x80000000 ? 0 : b));
      for (const { transB, cols, k, at } of layouts) {
        const words = new Uint16Array(k * cols);
        for (let j = 0; j < cols; j++) words[transB ? j * k + at : at * cols + j] = row[j % n]!;
        const b = T.fromHalfBits(words, transB ? [cols, k] : [k, cols], dtype, { backend: gpu });
        const a = T.tensor(
          Array.from({ length: k }, (_, i) => (i === at ? 1 : 0)),
          [1, k],
          { backend: gpu },
        );
        const y = T.matmul(a, b, { transB });
        // A one-hot A: each output is 0 + ... + w + ... + 0, so w itself but -0 (+0) and NaN (any NaN).
        expect(canon((await y.data()) as Float32Array).slice(0, n), `${dtype} transB ${transB} k ${k}`).toEqual(want);
        T.dispose([a, b, y]);
      }
      const table = T.fromHalfBits(row, [n, 1], dtype, { backend: gpu });
      const ids = T.tensor(
        Int32Array.from({ length: n }, (_, i) => n - 1 - i),
        [n],
        { dtype: 'i32', backend: gpu },
      );
      const rows = T.gather(table, ids, 0);
      const cast = T.cast(table, 'f32');
      expect(canon((await rows.data()) as Float32Array)).toEqual(canon(T.widenHalf(dtype, row.slice().reverse())));
      expect(canon((await cast.data()) as Float32Array)).toEqual(canon(T.widenHalf(dtype, row)));
      T.dispose([table, ids, rows, cast]);
    }
  });

  // Every configuration (the heuristic picks DL or DS on llvmpipe, L or S on a GPU).
  for (const cfg of [...MATMUL_CANDIDATES.tiled, ...MATMUL_CANDIDATES.direct] as TileConfig[]) {
    it.skipIf(!fits(cfg, gpu.runtime.device.limits))(
      `matmul with a half B equals the f32 matmul of B widened, bit for bit (${cfg.kind} ${cfg.name})`,
      async () => {
        setMatmulTileConfig(cfg);
        // Sizes that do and do not divide the tiles and the vec4 width; batched activations beside a 2-D weight.
        const shapes: [number[], number, number][] = [
          [[5], 7, 3],
          [[64], 64, 16],
          [[2, 3, 17], 23, 31],
          [[8], 16, 32],
        ];
        for (const dtype of HALVES) {
          for (const [lead, n, k] of shapes) {
            for (const transB of [false, true]) {
              for (const transA of m0(lead) === 5 ? [false, true] : [false]) {
                const m = lead.at(-1)!;
                const aShape = transA ? [k, m] : [...lead.slice(0, -1), m, k];
                const x = T.tensor(
                  values(
                    aShape.reduce((p, d) => p * d, 1),
                    m + k,
                  ),
                  aShape,
                  { backend: gpu },
                );
                const words = T.roundToHalf(dtype, values(k * n, n));
                const shape = transB ? [n, k] : [k, n];
                const half = T.fromHalfBits(words, shape, dtype, { backend: gpu });
                const wide = T.tensor(T.widenHalf(dtype, words), shape, { backend: gpu });
                const got = T.matmul(x, half, { transA, transB });
                const want = T.matmul(x, wide, { transA, transB });
                expect(
                  bitsOf((await got.data()) as Float32Array),
                  `${dtype} [${aShape}] n${n} k${k} ${transA} ${transB}`,
                ).toEqual(bitsOf((await want.data()) as Float32Array));
                // With an addend (the matmul rule's folded cotangent), here the product itself: exactly twice the
                // product (x + x is exact in f32), through the half B and the widened one alike.
                const plus = (b: T.Tensor): T.Tensor =>
                  Tensor.fromStorage(
                    gpu,
                    T.kernelsFor(gpu).matmul(kt('t', x), kt('t', b), transA, transB, want.shape, kt('t', want)),
                    want.shape,
                    'f32',
                  );
                const [gotD, wantD] = [plus(half), plus(wide)];
                const twice = bitsOf(Float32Array.from((await want.data()) as Float32Array, (v) => 2 * v));
                for (const [what, t] of [
                  ['half', gotD],
                  ['widened', wantD],
                ] as const)
                  expect(
                    bitsOf((await t.data()) as Float32Array),
                    `${dtype} [${aShape}] n${n} k${k} ${transA} ${transB} + addend (${what} B)`,
                  ).toEqual(twice);
                T.dispose([x, half, wide, got, want, gotD, wantD]);
              }
            }
          }
        }
      },
    );
  }

  it('the transformer with frozen bf16/f16 matrices: forward and norm gradients equal the widened ones, bit for bit', async () => {
    const config = T.smallConfig(29, {
      dModel: 32,
      nHeads: 4,
      nKvHeads: 2,
      dFf: 72,
      nLayers: 2,
      tieEmbeddings: false,
      qkvBias: true,
    });
    const params = T.initParams(config, new T.Rng(5), { backend: reference, std: 0.3 });
    for (const dtype of HALVES) {
      const { half, wide } = frozenPair(params, dtype, gpu);
      const tokens = T.tensor(new Int32Array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8]), [2, 6], {
        dtype: 'i32',
        backend: gpu,
      });
      const run = async (p: T.TransformerParams): Promise<number[][]> => {
        const loss = (final: T.Tensor, frozen: T.TransformerParams): T.Tensor =>
          T.sum(T.square(T.forward({ ...frozen, finalNorm: final }, config, tokens)));
        const logits = T.forward(p, config, tokens);
        const [v, g] = T.valueAndGrad(loss)(p.finalNorm, p);
        const out = [
          bitsOf((await logits.data()) as Float32Array),
          bitsOf((await v.data()) as Float32Array),
          bitsOf((await g.data()) as Float32Array),
        ];
        T.dispose([logits, v, g]);
        return out;
      };
      expect(await run(half)).toEqual(await run(wide));
    }
  });
});
