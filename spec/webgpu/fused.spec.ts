import { afterEach, expect, it } from 'vitest';
import {
  ATTENTION_SPLITS,
  attentionSplitRuns,
  setAttentionSplit,
} from '../../src/backends/webgpu/kernels/attention.js';
import { ROW_WORKGROUPS, setRowWorkgroupSize } from '../../src/backends/webgpu/kernels/rows.js';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import {
  attentionArb,
  compareForward,
  compareGrad,
  describeGpu,
  intsFor,
  RUNS,
  valuesFor,
  type Arg,
  type Tol,
} from './helpers.js';

/**
 * The fused kernels against the CPU reference backend, forward and backward (the whole vector-Jacobian product
 * through valueAndGrad): causal attention (grouped-query heads, key bias with PAD_BIAS, fewer queries than
 * keys, sequences longer than a 64-row tile, head sizes 1..128, the decoding kernel for few queries), RoPE of
 * one tensor and of a pair, SwiGLU, token log-probs with a temperature scale, the residual add + RMSNorm, the
 * sum of squares and multi-tensor AdamW.
 */
const FEW = { numRuns: 6 };
// f32 dot products over D <= 64 and online-softmax sums over <= 80 keys, against float64 on the CPU.
const ATTN: Tol = { atol: 2e-5, rtol: 2e-4 };
const ELEM: Tol = { atol: 1e-6, rtol: 4e-6 }; // one or two f32 roundings of exp-based expressions
const ROWS: Tol = { atol: 2e-6, rtol: 2e-5 }; // f32 row sums over up to 300 logits, a log
/** valueAndGrad comparisons: the value is an f32 sum of n weighted outputs (grad.spec.ts's rule). */
const summed = (args: readonly Arg[], scale = 1): Tol => ({
  atol: 2e-6 * Math.max(1, args[0]!.values.length) * scale,
  rtol: 2e-5 * scale,
});

describeGpu('webgpu fused attention', (gpu) => {
  const attend = ([q, k, v, bias]: T.Tensor[]): T.Tensor => T.causalAttention(q!, k!, v!, { keyBias: bias! });
  afterEach(() => setAttentionSplit(null));
  // The tiled kernels at each shape of work the tuner may pick (kernels/attention.ts): rows a workgroup, threads a row.
  /** Forward and backward of the attention kernels against the reference, over `arb`'s cases. */
  async function attentionAgrees(arb: ReturnType<typeof attentionArb>, runs: typeof RUNS): Promise<void> {
    await fc.assert(
      fc.asyncProperty(arb, (args) => compareForward('attention', args, attend, ATTN, gpu)),
      runs,
    );
    await fc.assert(
      fc.asyncProperty(arb, (args) =>
        compareGrad(
          'attention',
          args.slice(0, 3),
          ([q, k, v]) =>
            attend([q!, k!, v!, T.tensor([...args[3].values], [...args[3].shape], { backend: q!.backend })]),
          ATTN,
          gpu,
        ),
      ),
      runs,
    );
  }
  for (const c of ATTENTION_SPLITS) {
    const work = `${c.rows} rows a workgroup, ${c.split} threads a row`;
    it(`forward and backward, short sequences, head sizes 1..8, ${work} (atol ${ATTN.atol}, rtol ${ATTN.rtol})`, async () => {
      setAttentionSplit(c);
      await attentionAgrees(attentionArb(6, [1, 2, 3, 8]), RUNS);
    });
    it(`forward and backward over up to 80 rows, head sizes 16 and 64 (tiles of fewer rows than that), ${work}`, async () => {
      // A candidate the device cannot run would be replaced by the default: this case must run what it names.
      expect(attentionSplitRuns(gpu.runtime, 64, c)).toBe(true);
      setAttentionSplit(c);
      await attentionAgrees(attentionArb(80, [16, 64]), FEW);
    });
  }
  it('workgroup arrays fit the limit with each rounded to 16 bytes (d82, one and four threads a row)', async () => {
    // Counted in floats, d82's 49-row tiles came to 32,800 bytes on llvmpipe's 32 KiB: the dK/dV pipeline failed.
    for (const c of [ATTENTION_SPLITS[0]!, ATTENTION_SPLITS.find((s) => s.rows === 64 && s.split === 4)!]) {
      expect(attentionSplitRuns(gpu.runtime, 82, c)).toBe(true);
      setAttentionSplit(c);
      await attentionAgrees(attentionArb(8, [82]), { numRuns: 2 });
    }
  });

  it('long rows on a CPU rasterizer: more threads a row within its loop budget, past it a typed error', async () => {
    // One thread a row came out NaN in dK/dV on llvmpipe at d66 (f32 steps) x 400 keys (its loops end after 65,535
    // iterations an invocation); a split row stays within the budget. d64 x 1,100 (vec4 steps) needs a split by
    // the budget too. On a GPU these are ordinary cases.
    const rows = (t: number, d: number, seed: number): Arg => ({
      shape: [1, t, 1, d],
      values: Array.from({ length: t * d }, (_, i) => Math.fround(0.5 * Math.sin((i + 1) * seed))),
    });
    for (const [t, d] of [
      [400, 66],
      [1100, 64],
    ] as const) {
      const args = [rows(t, d, 1.1), rows(t, d, 2.3), rows(t, d, 3.7)];
      await compareGrad('attention, long rows', args, ([q, k, v]) => T.causalAttention(q!, k!, v!), ATTN, gpu);
    }
    if (!gpu.runtime.cpuLike) return;
    const q = T.zeros([1, 8192, 1, 128], { backend: gpu });
    expect(() => T.causalAttention(q, q, q)).toThrow(/8192 rows at head size 128 .* use the cpu backend/);
    q.dispose();
  });

  it('few queries over many keys (the split-over-keys decoding kernel), head sizes 3..128', async () => {
    const arb = attentionArb(4, [3, 64, 128], 100);
    await fc.assert(
      fc.asyncProperty(arb, (args) => compareForward('attention', args, attend, ATTN, gpu)),
      FEW,
    );
  });
  it('keyLength below the key rows (a preallocated KV cache; rows after it hold NaN): tiled and decoding kernels', async () => {
    // The rows from keyLength on (keys, values and bias) are NaN: reading any of them would show in the output.
    const capped = (maxT: number, dims: number[], maxExtra: number) =>
      attentionArb(maxT, dims, maxExtra).chain((args) =>
        fc.integer({ min: args[0].shape[1]!, max: args[1].shape[1]! }).map((len): [Arg[], number] => {
          const nan = (a: Arg, rowSize: number): Arg => ({
            ...a,
            values: a.values.map((v, i) => (Math.floor(i / rowSize) % a.shape[1]! >= len ? Number.NaN : v)),
          });
          const kvRow = args[1].shape[2]! * args[1].shape[3]!;
          return [[args[0], nan(args[1], kvRow), nan(args[2], kvRow), nan(args[3], 1)], len];
        }),
      );
    for (const arb of [capped(4, [3, 64], 40), capped(70, [8], 6)]) {
      await fc.assert(
        fc.asyncProperty(arb, ([args, len]) =>
          compareForward(
            'attention keyLength',
            args,
            ([q, k, v, bias]) => T.causalAttention(q!, k!, v!, { keyBias: bias!, keyLength: len }),
            ATTN,
            gpu,
          ),
        ),
        FEW,
      );
    }
  });
  it('without a key bias', async () => {
    const arb = attentionArb(5, [4]);
    await fc.assert(
      fc.asyncProperty(arb, (args) =>
        compareGrad('attention', args.slice(0, 3), ([q, k, v]) => T.causalAttention(q!, k!, v!), ATTN, gpu),
      ),
      RUNS,
    );
  });
});

describeGpu('webgpu fused elementwise and row kernels', (gpu) => {
  const ropeArb = fc
    .tuple(
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 5 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 3 }),
      fc.integer({ min: 1, max: 9 }),
    )
    .chain(([b, t, h, h2, half]) =>
      fc.tuple(
        valuesFor([b, t, h, 2 * half]),
        valuesFor([b, t, h2, 2 * half]),
        valuesFor([b, t, 1, half], -1, 1),
        valuesFor([b, t, 1, half], -1, 1),
      ),
    );
  it(`rotary and rotaryPair, forward and backward (atol ${ELEM.atol}, rtol ${ELEM.rtol})`, async () => {
    await fc.assert(
      fc.asyncProperty(ropeArb, (args) =>
        compareForward(
          'rope',
          args,
          ([x, y, c, s]) => [...T.rotaryPair(x!, y!, c!, s!), T.rotary(x!, c!, s!, true)],
          ELEM,
          gpu,
        ),
      ),
      RUNS,
    );
    await fc.assert(
      fc.asyncProperty(ropeArb, ([x, y, c, s]) =>
        compareGrad(
          'rope',
          [x, y],
          ([a, b]) => {
            const [p, q] = T.rotaryPair(
              a!,
              b!,
              T.tensor([...c.values], [...c.shape], { backend: a!.backend }),
              T.tensor([...s.values], [...s.shape], { backend: a!.backend }),
            );
            return T.add(T.sum(T.mul(p, 0.5)), T.sum(T.mul(q, q)));
          },
          summed([x, y]),
          gpu,
        ),
      ),
      RUNS,
    );
  });

  const pairArb = fc
    .array(fc.integer({ min: 1, max: 9 }), { minLength: 1, maxLength: 3 })
    .chain((s) => fc.tuple(valuesFor(s, -8, 8), valuesFor(s)));
  it('swiglu forward and backward', async () => {
    await fc.assert(
      fc.asyncProperty(pairArb, (args) => compareForward('swiglu', args, ([g, u]) => T.swiglu(g!, u!), ELEM, gpu)),
      RUNS,
    );
    await fc.assert(
      fc.asyncProperty(pairArb, (args) =>
        compareGrad('swiglu', args, ([g, u]) => T.swiglu(g!, u!), summed(args, 4), gpu),
      ),
      RUNS,
    );
  });

  const logitsArb = fc
    .tuple(
      fc.integer({ min: 1, max: 4 }),
      fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 100, max: 300 })),
      fc.constantFrom(1, 0.7, 2),
    )
    .chain(([rows, v, scale]) =>
      fc.tuple(valuesFor([rows, 2, v], -6, 6), intsFor([rows, 2], 0, v - 1), fc.constant(scale)),
    );
  afterEach(() => setRowWorkgroupSize(null));
  // Each workgroup size the tuner may pick for the row kernels (kernels/rows.ts), forced in turn.
  for (const wg of ROW_WORKGROUPS)
    it(`tokenLogProbs scaled, forward and backward, workgroups of ${wg} (atol ${ROWS.atol}, rtol ${ROWS.rtol})`, async () => {
      setRowWorkgroupSize(wg);
      await fc.assert(
        fc.asyncProperty(logitsArb, ([l, t, scale]) =>
          compareForward('tokenLogProbs', [l, t], ([x, y]) => T.tokenLogProbs(x!, y!, scale), ROWS, gpu),
        ),
        RUNS,
      );
      await fc.assert(
        fc.asyncProperty(logitsArb, ([l, t, scale]) =>
          compareGrad('tokenLogProbs', [l, t], ([x, y]) => T.tokenLogProbs(x!, y!, scale), summed([l], 4), gpu),
        ),
        RUNS,
      );
    });
  it('tokenLogProbs of a target outside the vocabulary: IndexRangeError on the CPU, NaN on WebGPU (unchecked there)', async () => {
    const logits = T.tensor([0, 1, 2, 3, 4, 5], [2, 3], { backend: gpu });
    const out = await T.tokenLogProbs(logits, T.tensor(new Int32Array([3, -1]), [2], { backend: gpu })).data();
    expect(Number.isNaN(out[0]!) && Number.isNaN(out[1]!)).toBe(true);
    expect(() => T.tokenLogProbs(T.tensor([0, 1, 2], [1, 3]), T.tensor(new Int32Array([3]), [1]))).toThrow(
      T.IndexRangeError,
    );
  });

  const normArb = fc
    .tuple(fc.integer({ min: 1, max: 4 }), fc.oneof(fc.integer({ min: 1, max: 9 }), fc.integer({ min: 60, max: 200 })))
    .chain(([r, d]) => fc.tuple(valuesFor([r, d], -3, 3), valuesFor([r, d], -1, 1), valuesFor([d], 0.5, 2)));
  for (const wg of ROW_WORKGROUPS)
    it(`addRmsNorm forward and backward (both outputs), workgroups of ${wg}`, async () => {
      setRowWorkgroupSize(wg);
      const f = ([x, dl, w]: T.Tensor[]): T.Tensor[] => {
        const o = T.addRmsNorm(x!, dl!, w!, 1e-5);
        return [o.sum, o.normed];
      };
      await fc.assert(
        fc.asyncProperty(normArb, (args) => compareForward('addRmsNorm', args, f, ROWS, gpu)),
        RUNS,
      );
      await fc.assert(
        fc.asyncProperty(normArb, (args) =>
          compareGrad('addRmsNorm', args, (xs) => T.add(f(xs)[1]!, T.mul(f(xs)[0]!, 0.5)), summed(args, 4), gpu),
        ),
        RUNS,
      );
    });
});

describeGpu('webgpu multi-tensor kernels', (gpu) => {
  // More leaves than one dispatch binds (2 per AdamW dispatch, 15 per sum-of-squares dispatch on llvmpipe).
  const leavesArb = fc
    .integer({ min: 1, max: 20 })
    .chain((n) =>
      fc.tuple(
        ...Array.from({ length: n }, () =>
          fc
            .array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 2 })
            .chain((s) => fc.tuple(valuesFor(s), valuesFor(s), valuesFor(s, -1, 1), valuesFor(s, 0, 1))),
        ),
      ),
    );
  it('sumSquares and adamwUpdateMany with and without clipping (atol 1e-6, rtol 2e-5)', async () => {
    await fc.assert(
      fc.asyncProperty(leavesArb, fc.constantFrom(undefined, 0.1, 1e6), async (leaves, maxNorm) => {
        const n = leaves.length;
        const args = leaves.flat();
        const weightDecays = leaves.map((_, i) => (i % 3 === 0 ? 0 : 0.05));
        await compareForward(
          'adamwMany',
          args,
          (xs) => {
            const pick = (k: number): T.Tensor[] => Array.from({ length: n }, (_, i) => xs[4 * i + k]!);
            const sumSq = T.sumSquares(pick(1));
            const out = T.adamwUpdateMany(pick(0), pick(1), pick(2), pick(3), maxNorm === undefined ? null : sumSq, {
              lr: 0.01,
              beta1: 0.9,
              beta2: 0.999,
              eps: 1e-8,
              step: 2,
              weightDecays,
              ...(maxNorm === undefined ? {} : { maxNorm }),
            });
            return [sumSq, ...out.flatMap((o) => [o.param, o.m, o.v])];
          },
          { atol: 1e-6, rtol: 2e-5 },
          gpu,
        );
      }),
      FEW,
    );
  });
});
