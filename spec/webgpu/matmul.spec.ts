import { afterEach, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import { setMatmulTileConfig } from '../../src/backends/webgpu/kernels/matmul.js';
import { fits, MATMUL_CANDIDATES, type TileConfig } from '../../src/backends/webgpu/kernels/matmul-configs.js';
import { broadcastPairArb, compareForward, describeGpu, RUNS, valuesFor, type Tol } from './helpers.js';
import { Tensor } from '../../src/core/tensor.js';
import { kt } from '../../src/ops/op.js';

/**
 * The tiled matmul against the CPU backend: M, N, K odd, not dividing the tiles, dividing them (the pipeline
 * without bounds checks), size 1; both transposes; broadcast batch dims; vec4 and scalar loads (inner sizes that
 * are and are not multiples of 4); each configuration of the tiled kernel (workgroup memory, used on GPUs) and
 * of the direct kernel (no workgroup memory, used on CPU-emulated adapters such as llvmpipe).
 * Tolerance: both sides accumulate the K products in f32 in the same order, the GPU with fused multiply-adds:
 * each step may differ by an f32 rounding of a term up to 4 (inputs in [-2, 2]), so atol = 1e-6 * K, rtol 1e-6.
 */
const dim = fc.oneof(fc.integer({ min: 1, max: 70 }), fc.constantFrom(4, 16, 32, 64, 128));
const tolFor = (k: number): Tol => ({ atol: 1e-6 * k, rtol: 1e-6 });

const caseArb = fc
  .record({ m: dim, n: dim, k: dim, transA: fc.boolean(), transB: fc.boolean(), batch: broadcastPairArb(2, 3) })
  .chain((c) => {
    const aShape = [...c.batch[0], ...(c.transA ? [c.k, c.m] : [c.m, c.k])];
    const bShape = [...c.batch[1], ...(c.transB ? [c.n, c.k] : [c.k, c.n])];
    return fc.tuple(fc.constant(c), valuesFor(aShape), valuesFor(bShape));
  });

/** A case with an addend of the product's shape (the batch dims broadcast). */
const addendArb = caseArb.chain(([c, a, b]) => {
  const [p, q] = c.batch;
  const batch = Array.from({ length: Math.max(p.length, q.length) }, (_, i) =>
    Math.max(p[p.length - 1 - i] ?? 1, q[q.length - 1 - i] ?? 1),
  ).reverse();
  return valuesFor([...batch, c.m, c.n]).map((d) => [c, a, b, d] as const);
});

/** addend + op(A) op(B) through the kernel table's matmul (what the matmul rule calls when it folds a prior in). */
const plus = (c: { transA: boolean; transB: boolean }, [x, y, d]: T.Tensor[]): T.Tensor => {
  const s = T.kernelsFor(x!.backend).matmul(kt('t', x!), kt('t', y!), c.transA, c.transB, d!.shape, kt('t', d!));
  return Tensor.fromStorage(x!.backend, s, d!.shape, 'f32');
};

describeGpu('webgpu matmul', (gpu) => {
  afterEach(() => setMatmulTileConfig(null));

  it('random shapes, transposes and broadcast batches (heuristic tile choice)', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, ([c, a, b]) =>
        compareForward(
          'matmul',
          [a, b],
          ([x, y]) => T.matmul(x!, y!, { transA: c.transA, transB: c.transB }),
          tolFor(c.k),
          gpu,
        ),
      ),
      { numRuns: 25 },
    );
  });

  for (const cfg of [...MATMUL_CANDIDATES.tiled, ...MATMUL_CANDIDATES.direct] as TileConfig[]) {
    // A configuration past this device's workgroup limits is never offered on it (the tuner filters it too).
    it.skipIf(!fits(cfg, gpu.runtime.device.limits))(
      `${cfg.kind} configuration ${cfg.name} (${cfg.wx}x${cfg.wy} threads, ${cfg.rm}x${cfg.rn} per thread, K step ${cfg.tk}) on random shapes`,
      async () => {
        setMatmulTileConfig(cfg);
        await fc.assert(
          fc.asyncProperty(caseArb, ([c, a, b]) =>
            compareForward(
              'matmul',
              [a, b],
              ([x, y]) => T.matmul(x!, y!, { transA: c.transA, transB: c.transB }),
              tolFor(c.k),
              gpu,
            ),
          ),
          RUNS,
        );
      },
    );

    it.skipIf(!fits(cfg, gpu.runtime.device.limits))(
      `${cfg.kind} configuration ${cfg.name} with an addend (added by the store, or by split-K's sum)`,
      async () => {
        setMatmulTileConfig(cfg);
        await fc.assert(
          fc.asyncProperty(addendArb, ([c, a, b, d]) =>
            compareForward('matmul + addend', [a, b, d], (xs) => plus(c, xs), tolFor(c.k + 2), gpu),
          ),
          RUNS,
        );
      },
    );

    it.skipIf(!fits(cfg, gpu.runtime.device.limits))(
      `${cfg.kind} configuration ${cfg.name}: shapes that divide the tile (bounds checks compiled out), every transpose`,
      async () => {
        setMatmulTileConfig(cfg);
        const tm = cfg.wy * cfg.rm;
        const tn = cfg.wx * cfg.rn;
        for (const [m, n, k] of [
          [tm, tn, cfg.tk],
          [2 * tm, tn, 2 * cfg.tk],
          [tm, 2 * tn, 4 * cfg.tk],
        ] as const) {
          for (const transA of [false, true]) {
            for (const transB of [false, true]) {
              const a = await fc.sample(valuesFor(transA ? [k, m] : [m, k]), 1)[0]!;
              const b = await fc.sample(valuesFor(transB ? [n, k] : [k, n]), 1)[0]!;
              await compareForward(
                `matmul ${m}x${n}x${k} ${transA} ${transB}`,
                [a, b],
                ([x, y]) => T.matmul(x!, y!, { transA, transB }),
                tolFor(k),
                gpu,
              );
            }
          }
        }
      },
    );
  }

  it('vectors (1-D operands) and K = 1', async () => {
    const arb = fc
      .tuple(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 1, max: 40 }))
      .chain(([m, k]) => fc.tuple(valuesFor([m, k]), valuesFor([k]), valuesFor([m, 1]), valuesFor([1, k])));
    await fc.assert(
      fc.asyncProperty(arb, ([a, v, c, r]) =>
        compareForward(
          'matvec',
          [a, v, c, r],
          ([x, y, z, w]) => [T.matmul(x!, y!), T.matmul(y!, T.transpose(x!)), T.matmul(z!, w!)],
          tolFor(40),
          gpu,
        ),
      ),
      RUNS,
    );
  });

  it('an empty inner dimension gives zeros, or the addend', async () => {
    const x = T.zeros([3, 0], { backend: gpu });
    const y = T.zeros([0, 5], { backend: gpu });
    const z = T.matmul(x, y);
    expect([...(await z.data())]).toEqual(new Array(15).fill(0));
    const d = T.tensor(
      Array.from({ length: 15 }, (_, i) => i - 7),
      [3, 5],
      { backend: gpu },
    );
    const zd = plus({ transA: false, transB: false }, [x, y, d]);
    expect([...(await zd.data())]).toEqual(Array.from({ length: 15 }, (_, i) => i - 7));
    T.dispose([x, y, z, d, zd]);
  });
});
