import { existsSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as T from '../../src/index.js';
import {
  attentionArb,
  compareForward,
  compareGrad,
  intsFor,
  on,
  reference,
  valuesFor,
  type Arg,
  type Tol,
} from '../helpers/compare.js';

/** Bytes a memory64 backend carves (and never touches) before a spec's tensors, so all of theirs lie past 4 GiB. */
export const PAST_4_GIB = 4.5 * 1024 ** 3;

/**
 * The CPU backend's WebAssembly kernels of one build (plain SIMD, or relaxed SIMD's fused multiply-add; a 32-bit
 * memory, or memory64 with every tensor past 4 GiB) against the reference backend (f32 inputs; the reference sums in f64),
 * forward and through valueAndGrad, on 2 threads (every kernel split, however small); the same inputs on 1, 2 and 3 threads give bit-identical results;
 * the cases a WebAssembly kernel does not cover run the reference kernel, counted.
 */
export function cpuKernelSpecs(fma: boolean, memory64 = false): void {
  /** A backend of this build; a memory64 one with its first 4.5 GiB carved, so every address needs 33 bits or more. */
  const open = (opts: T.CpuOptions): T.CpuBackend => {
    const b = new T.CpuBackend({ ...opts, fma, ...(opts.sharedMemory === false ? {} : { memory64 }) });
    if (memory64 && opts.sharedMemory !== false) b.rt.alloc(PAST_4_GIB);
    return b;
  };
  const cpu = open({ threads: 2, minParallelWork: 0, minWakeWork: 0 });
  beforeAll(() => cpu.whenReady());
  const build =
    (fma ? 'relaxed-SIMD (fused multiply-add) build' : 'plain SIMD build') + (memory64 ? ', memory64 past 4 GiB' : '');
  const RUNS = { numRuns: 25 };
  // f32 sums of up to ~300 products (matmul) or ~80 keys (attention), against float64.
  const SUMS: Tol = { atol: 2e-5, rtol: 2e-4 };
  const ELEM: Tol = { atol: 1e-6, rtol: 4e-6 };
  const ROWS: Tol = { atol: 2e-6, rtol: 2e-5 };
  const summed = (args: readonly Arg[], scale = 1): Tol => ({
    atol: 2e-6 * Math.max(1, args[0]!.values.length) * scale,
    rtol: 2e-5 * scale,
  });

  /**
   * matmul against the reference (which sums in f64), entry by entry within atol + rtol * (|A| |B|)_ij: an f32 dot
   * product of K terms summed in any order is within K u sum_k |a_ik b_kj| of the exact one (Higham, "Accuracy and
   * Stability of Numerical Algorithms", Sec. 3.1; u = 2^-24, K <= 300 here: 1.8e-5), whatever its value. A bound
   * relative to the result itself fails where the terms cancel to near zero (seed 1008049371 found one: 0.24687 from
   * terms of size 4, off by 7e-5, on every commit since the kernel landed). Tighter than the old SUMS wherever they do
   * not cancel.
   */
  async function compareMatmul(a: Arg, b: Arg, o: { transA: boolean; transB: boolean }): Promise<void> {
    const tol = { atol: 2e-5, rtol: 2e-5 };
    const [want, scale] = T.tidy(() => {
      const [x, y] = [on(reference, a), on(reference, b)];
      return [T.matmul(x, y, o), T.matmul(T.abs(x), T.abs(y), o)];
    });
    const got = T.tidy(() => T.matmul(on(cpu, a), on(cpu, b), o));
    try {
      expect(got.shape).toEqual(want.shape);
      const [g, w, s] = [await got.data(), await want.data(), await scale.data()];
      for (let i = 0; i < w.length; i++) {
        const bound = tol.atol + tol.rtol * s[i]!;
        if (!(Math.abs(g[i]! - w[i]!) <= bound))
          expect.fail(`matmul out[${i}]: got ${g[i]}, want ${w[i]} (bound ${bound.toExponential(3)} from |A||B|)`);
      }
    } finally {
      T.dispose([got, want, scale]);
    }
  }

  const matmulArb = fc
    .record({
      m: fc.integer({ min: 1, max: 40 }),
      n: fc.integer({ min: 1, max: 40 }),
      // past one K block (256) now and then
      k: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 250, max: 300 })),
      batch: fc.constantFrom([], [2], [3, 1]),
      bBatch: fc.constantFrom('same', 'broadcast'),
      transA: fc.boolean(),
      transB: fc.boolean(),
    })
    .chain((x) => {
      const bb = x.bBatch === 'same' ? x.batch : x.batch.map(() => 1);
      return fc.tuple(
        valuesFor([...x.batch, ...(x.transA ? [x.k, x.m] : [x.m, x.k])]),
        valuesFor([...bb, ...(x.transB ? [x.n, x.k] : [x.k, x.n])]),
        fc.constant({ transA: x.transA, transB: x.transB }),
      );
    });

  const withBias = (q: T.Tensor, bias: Arg): T.Tensor =>
    T.tensor([...bias.values], [...bias.shape], { backend: q.backend });

  describe(`cpu backend kernels (${build}) against the reference backend`, () => {
    it(`matmul: every transpose, batch broadcast, odd sizes, K past one block (atol ${SUMS.atol}, rtol ${SUMS.rtol})`, async () => {
      await fc.assert(
        fc.asyncProperty(matmulArb, ([a, b, o]) => compareMatmul(a, b, o)),
        RUNS,
      );
      await fc.assert(
        fc.asyncProperty(matmulArb, ([a, b, o]) =>
          compareGrad('matmul', [a, b], ([x, y]) => T.matmul(x!, y!, o), summed([a], 40), cpu),
        ),
        { numRuns: 10 },
      );
      // One input in two products (a layer's gate and up): the second product's rule folds the first's dA in.
      await fc.assert(
        fc.asyncProperty(matmulArb, ([a, b, o]) =>
          compareGrad(
            'two products of one input',
            [a, b, b],
            ([x, y, z]) => T.add(T.matmul(x!, y!, o), T.mul(T.matmul(x!, z!, o), 0.5)),
            summed([a], 80),
            cpu,
          ),
        ),
        { numRuns: 10 },
      );
    });

    it('matmul gives each entry the f32 sum of its products in order of k, K in blocks of 256 added in order', () => {
      // The exact value, not a tolerance: the kernels' loop structure may change, each entry's arithmetic may not
      // (a run's metrics stay bit-identical). One multiply-add a step from 0, fused where this build fuses.
      const step =
        fma && fusedHardware() ? fmaF32 : (a: number, b: number, c: number) => Math.fround(Math.fround(a * b) + c);
      const rng = new T.Rng(11);
      // Edge tiles (M, N not multiples of 4 and 8), K past one block, every transpose, a batch.
      for (const [batch, m, n, k] of [
        [1, 7, 13, 300],
        [2, 130, 70, 64],
        [1, 4, 8, 513],
      ] as const)
        for (const transA of [false, true])
          for (const transB of [false, true]) {
            const av = T.randn([batch, m * k], rng).dataSync();
            const bv = T.randn([batch, k * n], rng).dataSync();
            const got = T.tidy(() =>
              T.matmul(
                T.tensor(av, [batch, transA ? k : m, transA ? m : k], { backend: cpu }),
                T.tensor(bv, [batch, transB ? n : k, transB ? k : n], { backend: cpu }),
                { transA, transB },
              ).dataSync(),
            );
            for (let t = 0; t < batch; t++)
              for (let i = 0; i < m; i++)
                for (let j = 0; j < n; j++) {
                  let c = 0;
                  for (let p0 = 0; p0 < k; p0 += 256) {
                    let acc = 0;
                    for (let p = p0; p < Math.min(k, p0 + 256); p++) {
                      const a = av[t * m * k + (transA ? p * m + i : i * k + p)]!;
                      const b = bv[t * k * n + (transB ? j * k + p : p * n + j)]!;
                      acc = step(a, b, acc);
                    }
                    c = p0 === 0 ? acc : Math.fround(c + acc);
                  }
                  const g = got[(t * m + i) * n + j]!;
                  if (g !== c)
                    expect.fail(
                      `[${batch}, ${m}, ${k}] x [${k}, ${n}] transA ${transA} transB ${transB}: out[${t}, ${i}, ${j}] = ${g}, want ${c}`,
                    );
                }
          }
    });

    it("SwiGLU gives each entry the exact f32 value of its exp's arithmetic (Cephes' expf, step by step)", () => {
      // Pins the arithmetic of exp4 (which attention, softmax and the log-probs share) to the value computed here,
      // op by op in f32: its instructions may change, its values may not. Every range: underflow, overflow, ties.
      const madd = fma && fusedHardware() ? fmaF32 : (a: number, b: number, c: number) => f(f(a * b) + c);
      const exp = (x: number): number => {
        const [lo, hi] = [f(-87.3365448), f(88.7228391)];
        if (x < lo) return 0;
        if (x > hi) return Number.POSITIVE_INFINITY;
        const n = roundHalfEven(f(x * f(Math.LOG2E)));
        const r = f(f(x - f(n * f(0.693359375))) - f(n * f(-2.1219444e-4)));
        let p = f(1.98756915e-4);
        for (const c of [1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1])
          p = madd(p, r, f(c));
        p = f(madd(p, f(r * r), r) + 1);
        const half = n >> 1;
        return f(f(p * 2 ** half) * 2 ** (n - half));
      };
      const swiglu = (g: number, u: number): number => f(f(g * f(1 / f(1 + exp(-g)))) * u);
      const rng = new T.Rng(12);
      const gate = Float32Array.from({ length: 4003 }, (_, i) =>
        i < 2000 ? rng.normal() * 12 : i < 3000 ? (i - 2500) * 0.25 : rng.normal() * 120,
      );
      gate.set([-87.3, -87.4, -88.8, 87.3, 88.7, 88.8, 0, -0, 1e-30, -1e-30], 3990);
      const up = Float32Array.from({ length: gate.length }, () => rng.normal());
      const got = T.tidy(() =>
        T.swiglu(
          T.tensor(gate, [gate.length], { backend: cpu }),
          T.tensor(up, [up.length], { backend: cpu }),
        ).dataSync(),
      );
      for (let i = 0; i < gate.length; i++) {
        const want = swiglu(gate[i]!, up[i]!);
        if (!Object.is(got[i], want)) expect.fail(`swiglu(${gate[i]}, ${up[i]}) = ${got[i]}, want ${want}`);
      }
    });

    it('causal attention forward and backward: grouped-query heads, padding keys, fewer queries than keys', async () => {
      const arb = attentionArb(9, [4, 8, 12, 32]);
      const attend = ([q, k, v, bias]: T.Tensor[]): T.Tensor => T.causalAttention(q!, k!, v!, { keyBias: bias! });
      await fc.assert(
        fc.asyncProperty(arb, (args) => compareForward('attention', args, attend, SUMS, cpu)),
        RUNS,
      );
      await fc.assert(
        fc.asyncProperty(arb, (args) =>
          compareGrad(
            'attention',
            args.slice(0, 3),
            ([q, k, v]) => attend([q!, k!, v!, withBias(q!, args[3])]),
            SUMS,
            cpu,
          ),
        ),
        RUNS,
      );
    });

    it('attention gives a row the same bits whatever left padding precedes it (the sampler and scoring rely on it)', () => {
      fc.assert(
        fc.property(
          fc.record({
            t: fc.integer({ min: 1, max: 13 }),
            pad: fc.integer({ min: 1, max: 9 }),
            d: fc.constantFrom(4, 8, 16),
            seed: fc.nat(),
          }),
          ({ t, pad, d, seed }) => {
            const rng = new T.Rng(seed);
            const [q, k, v] = [0, 1, 2].map(() => T.randn([1, t, 2, d], rng).dataSync());
            const run = (p: number): number[] =>
              T.tidy(() => {
                const padded = (x: T.TypedArray): T.Tensor =>
                  T.tensor(Float32Array.from([...new Array(p * 2 * d).fill(0.5), ...x]), [1, t + p, 2, d], {
                    backend: cpu,
                  });
                const bias = T.tensor([...new Array(p).fill(T.PAD_BIAS), ...new Array(t).fill(0)], [1, t + p], {
                  backend: cpu,
                });
                const out = T.causalAttention(padded(q!), padded(k!), padded(v!), { keyBias: bias }).dataSync();
                return Array.from(out.subarray(p * 2 * d));
              });
            expect(run(pad)).toEqual(run(0));
          },
        ),
        RUNS,
      );
    });

    it('attention over the first keyLength rows (rows past it hold NaN and are never read)', async () => {
      const arb = attentionArb(6, [8], 6).chain((args) =>
        fc.integer({ min: args[0].shape[1]!, max: args[1].shape[1]! }).map((len): [Arg[], number] => {
          const nan = (a: Arg, row: number): Arg => ({
            ...a,
            values: a.values.map((v, i) => (Math.floor(i / row) % a.shape[1]! >= len ? Number.NaN : v)),
          });
          const kvRow = args[1].shape[2]! * args[1].shape[3]!;
          return [[args[0], nan(args[1], kvRow), nan(args[2], kvRow), nan(args[3], 1)], len];
        }),
      );
      await fc.assert(
        fc.asyncProperty(arb, ([args, len]) =>
          compareForward(
            'attention keyLength',
            args,
            ([q, k, v, b]) => T.causalAttention(q!, k!, v!, { keyBias: b!, keyLength: len }),
            SUMS,
            cpu,
          ),
        ),
        RUNS,
      );
    });

    it('RMSNorm, the residual add + RMSNorm, SwiGLU and RoPE, forward and backward', async () => {
      const rows = fc
        .record({ r: fc.integer({ min: 1, max: 9 }), d: fc.constantFrom(4, 8, 20, 64) })
        .chain(({ r, d }) => fc.tuple(valuesFor([r, d]), valuesFor([r, d]), valuesFor([d], 0.5, 1.5)));
      await fc.assert(
        fc.asyncProperty(rows, ([x, , w]) =>
          compareGrad('rmsNorm', [x, w], ([a, g]) => T.rmsNorm(a!, g!, 1e-5), summed([x]), cpu),
        ),
        RUNS,
      );
      // Both orders: the tape visits the norm before the sum's own use (two kernels and an add), or after it (the
      // norm's backward is offered the sum's cotangent and folds it into dx).
      for (const normFirst of [false, true]) {
        await fc.assert(
          fc.asyncProperty(rows, ([x, delta, w]) =>
            compareGrad(
              'addRmsNorm',
              [x, delta, w],
              ([a, b, g]) => {
                const { sum, normed } = T.addRmsNorm(a!, b!, g!, 1e-5);
                return normFirst ? T.add(normed, T.mul(sum, 0.5)) : T.add(T.mul(sum, 0.5), normed);
              },
              summed([x]),
              cpu,
            ),
          ),
          RUNS,
        );
      }
      const pair = fc.integer({ min: 1, max: 60 }).chain((n) => fc.tuple(valuesFor([n], -6, 6), valuesFor([n])));
      await fc.assert(
        fc.asyncProperty(pair, ([g, u]) =>
          compareGrad('swiglu', [g, u], ([a, b]) => T.swiglu(a!, b!), summed([g]), cpu),
        ),
        RUNS,
      );
      const rope = fc
        .record({ r: fc.integer({ min: 1, max: 5 }), h: fc.integer({ min: 1, max: 3 }), d: fc.constantFrom(8, 16, 32) })
        .chain(({ r, h, d }) =>
          fc.tuple(
            valuesFor([r, h, d]),
            valuesFor([r, 2, d]),
            valuesFor([r, 1, d / 2], -1, 1),
            valuesFor([r, 1, d / 2], -1, 1),
          ),
        );
      await fc.assert(
        fc.asyncProperty(rope, ([q, k, c, s]) =>
          compareGrad(
            'rotaryPair',
            [q, k],
            ([a, b]) => {
              const [cos, sin] = [c, s].map((x) => on(a!.backend, x));
              const [qr, kr] = T.rotaryPair(a!, b!, cos!, sin!);
              T.dispose([cos!, sin!]);
              return T.add(T.sum(qr, [1], true), T.sum(kr, [1], true));
            },
            summed([q]),
            cpu,
          ),
        ),
        RUNS,
      );
    });

    it('exp at the ends of its range (SwiGLU, softmax): exact 0 far below, the reference elsewhere', async () => {
      const gate = [-1e4, -120, -88, -87, -20, -1, 0, 1, 20, 87, 88, 120, 1e4];
      const up = gate.map((_, i) => 1 + i / 8);
      await compareForward(
        'swiglu extremes',
        [
          { shape: [13], values: gate },
          { shape: [13], values: up },
        ],
        ([g, u]) => T.swiglu(g!, u!),
        ELEM,
        cpu,
      );
      // Far below -87 a score's exp is exactly 0, as a scalar exp underflows.
      const logits = [0, -1e9, -100, -88, 3, -1e9, 1, 2];
      const sm = T.softmax(T.tensor(logits, [8], { backend: cpu })).dataSync();
      expect([sm[1], sm[2], sm[5]]).toEqual([0, 0, 0]);
      await compareForward('softmax extremes', [{ shape: [1, 8], values: logits }], ([x]) => T.softmax(x!), ROWS, cpu);
    });

    it('token log-probs with a temperature scale (the kernel gives NaN for a target out of range), softmax and log-softmax', async () => {
      const arb = fc
        .record({
          r: fc.integer({ min: 1, max: 6 }),
          v: fc.integer({ min: 2, max: 70 }),
          scale: fc.constantFrom(1, 1 / 0.7, 2),
        })
        .chain(({ r, v, scale }) => fc.tuple(valuesFor([r, v], -5, 5), intsFor([r], 0, v - 1), fc.constant(scale)));
      await fc.assert(
        fc.asyncProperty(arb, ([l, t, s]) =>
          compareGrad(
            'tokenLogProbs',
            [l],
            ([x]) => {
              const targets = on(x!.backend, t);
              const y = T.tokenLogProbs(x!, targets, s);
              targets.dispose();
              return y;
            },
            summed([l]),
            cpu,
          ),
        ),
        RUNS,
      );
      // The op range-checks its targets on a synchronous backend; the kernel's own contract is NaN out of range.
      const k = T.kernelsFor(cpu);
      const logits = T.tensor([1, 2, 3, 4, 5, 6], [2, 3], { backend: cpu });
      const targets = T.tensor([-1, 3], [2], { dtype: 'i32', backend: cpu });
      const kt = (t: T.Tensor) => ({ storage: t.storageFor('spec'), shape: t.shape, dtype: t.dtype });
      const s = k.tokenLogProbs(kt(logits), kt(targets), 1);
      const out = cpu.readSync({ storage: s, shape: [2], dtype: 'f32' });
      cpu.free(s);
      expect(Array.from(out).every(Number.isNaN)).toBe(true);
      T.dispose([logits, targets]);
      await fc.assert(
        fc.asyncProperty(arb, ([l]) =>
          compareForward('softmax', [l], ([x]) => [T.softmax(x!), T.logSoftmax(x!)], ROWS, cpu),
        ),
        RUNS,
      );
    });

    it('binary ops: same shapes, a scalar, a trailing row (and their gradients); other broadcasts fall back', async () => {
      const arb = fc
        .record({
          r: fc.integer({ min: 1, max: 7 }),
          c: fc.integer({ min: 1, max: 11 }),
          kind: fc.constantFrom('same', 'scalar', 'row', 'col'),
        })
        .chain(({ r, c, kind }) => {
          const bShape = kind === 'same' ? [r, c] : kind === 'scalar' ? [] : kind === 'row' ? [c] : [r, 1];
          return fc.tuple(
            valuesFor([r, c]),
            valuesFor(bShape, 0.5, 2),
            fc.constantFrom('add', 'sub', 'mul', 'div', 'maximum', 'minimum'),
          );
        });
      await fc.assert(
        fc.asyncProperty(arb, ([a, b, op]) =>
          compareGrad(
            op,
            [a, b],
            ([x, y]) => (T as unknown as Record<string, (p: T.Tensor, q: T.Tensor) => T.Tensor>)[op]!(x!, y!),
            summed([a]),
            cpu,
          ),
        ),
        RUNS,
      );
      await fc.assert(
        fc.asyncProperty(arb, ([a, b, op]) =>
          compareForward(
            op,
            [a, b],
            ([x, y]) => (T as unknown as Record<string, (p: T.Tensor, q: T.Tensor) => T.Tensor>)[op]!(x!, y!),
            ELEM,
            cpu,
          ),
        ),
        RUNS,
      );
    });

    it('gather (embedding rows) and its adjoint, updateSlice (the KV cache), slice and pad equal the reference', async () => {
      const gatherArb = fc
        .record({
          v: fc.integer({ min: 1, max: 9 }),
          d: fc.integer({ min: 1, max: 7 }),
          n: fc.integer({ min: 1, max: 6 }),
          axis: fc.constantFrom(0, 1),
        })
        .chain(({ v, d, n, axis }) =>
          fc.tuple(valuesFor([v, d]), intsFor([n], 0, (axis === 0 ? v : d) - 1), fc.constant(axis)),
        );
      await fc.assert(
        fc.asyncProperty(gatherArb, ([x, i, axis]) =>
          compareForward('gather', [x, i], ([a, b]) => T.gather(a!, b!, axis), { atol: 0, rtol: 0 }, cpu),
        ),
        RUNS,
      );
      const sliceArb = fc
        .array(fc.integer({ min: 1, max: 5 }), { minLength: 1, maxLength: 4 })
        .chain((shape) => fc.tuple(fc.constant(shape), fc.tuple(...shape.map((n) => fc.integer({ min: 1, max: n })))))
        .chain(([shape, sub]) =>
          fc.tuple(
            valuesFor(shape),
            valuesFor(sub),
            fc.tuple(...shape.map((n, i) => fc.integer({ min: 0, max: n - sub[i]! }))),
          ),
        );
      await fc.assert(
        fc.asyncProperty(sliceArb, ([dst, src, begin]) =>
          compareForward(
            'updateSlice',
            [dst, src],
            ([a, b]) => T.updateSlice(T.add(a!, 0), b!, begin),
            { atol: 0, rtol: 0 },
            cpu,
          ),
        ),
        RUNS,
      );
      // slice and its adjoint pad, any dtype (block copies, no arithmetic): exactly the reference's, and the cpu
      // backend's own (no fallback counted).
      T.resetFallbackCounts(cpu);
      await fc.assert(
        fc.asyncProperty(sliceArb, fc.constantFrom('f32', 'f64', 'i32'), ([x, part, begin], dtype) => {
          const size = part.shape;
          return compareForward(
            'slice and pad',
            [x],
            ([a]) => {
              const s = T.slice(T.cast(a!, dtype), begin, size);
              return [s, T.pad(T.add(s, s), begin, x.shape)];
            },
            { atol: 0, rtol: 0 },
            cpu,
          );
        }),
        RUNS,
      );
      // scatterAdd (the embedding's gradient): duplicate indices summed in the reference's order, bit for bit.
      const scatterArb = fc
        .record({
          outer: fc.integer({ min: 1, max: 3 }),
          len: fc.integer({ min: 1, max: 6 }),
          inner: fc.integer({ min: 1, max: 5 }),
          n: fc.integer({ min: 1, max: 12 }),
          axis: fc.constantFrom(0, 1),
        })
        .chain(({ outer, len, inner, n, axis }) => {
          const out = axis === 0 ? [len, inner] : [outer, len, inner];
          const updates = axis === 0 ? [n, inner] : [outer, n, inner];
          return fc.tuple(valuesFor(updates), intsFor([n], 0, len - 1), fc.constant(out), fc.constant(axis));
        });
      await fc.assert(
        fc.asyncProperty(scatterArb, fc.constantFrom('f32', 'f64'), ([u, i, out, axis], dtype) =>
          compareForward(
            'scatterAdd',
            [u, i],
            ([a, b]) => T.scatterAdd(T.cast(a!, dtype), b!, axis, out),
            { atol: 0, rtol: 0 },
            cpu,
          ),
        ),
        RUNS,
      );
      expect(T.fallbackCounts(cpu).slice).toBeUndefined();
      expect(T.fallbackCounts(cpu).pad).toBeUndefined();
      expect(T.fallbackCounts(cpu).scatterAdd).toBeUndefined();
    });

    it('sum of squares and multi-tensor AdamW with clipping', async () => {
      const arb = fc.tuple(valuesFor([3, 5]), valuesFor([7]), valuesFor([3, 5]), valuesFor([7]));
      await fc.assert(
        fc.asyncProperty(arb, ([p1, p2, g1, g2]) =>
          compareForward(
            'adamwMany',
            [p1, p2, g1, g2],
            ([a, b, ga, gb]) => {
              const z = [T.zerosLike(a!), T.zerosLike(b!)];
              const ss = T.sumSquares([ga!, gb!]);
              const out = T.adamwUpdateMany([a!, b!], [ga!, gb!], z, z, ss, {
                lr: 0.01,
                beta1: 0.9,
                beta2: 0.999,
                eps: 1e-8,
                step: 1,
                weightDecays: [0.1, 0],
                maxNorm: 0.5,
              });
              return [ss, ...out.flatMap((s) => [s.param, s.m, s.v])];
            },
            { atol: 1e-6, rtol: 1e-5 },
            cpu,
          ),
        ),
        RUNS,
      );
    });
  });

  describe(`cpu backend (${build}): threads, fallbacks, memory`, () => {
    // Every kernel split among the threads, however small (minParallelWork 0).
    const backends = [1, 2, 3].map((threads) => open({ threads, minParallelWork: 0, minWakeWork: 0 }));

    it('every kernel gives bit-identical results on 1, 2 and 3 threads (every call split among them)', async () => {
      await Promise.all(backends.map((b) => b.whenReady()));
      const runs = backends.map((b) => b.poolStats().parallelRuns);
      const rng = new T.Rng(7);
      const shapes: Record<string, number[]> = {
        a: [2, 70, 130],
        b: [130, 90],
        q: [2, 33, 4, 16],
        k: [2, 33, 2, 16],
        v: [2, 33, 2, 16],
        x: [200, 64],
        w: [64],
        l: [120, 300],
      };
      const values = Object.fromEntries(Object.entries(shapes).map(([n, s]) => [n, T.randn(s, rng).dataSync()]));
      const targets = Int32Array.from({ length: 120 }, (_, i) => (i * 37) % 300);
      const results = backends.map((backend) =>
        T.tidy(() => {
          const t = Object.fromEntries(
            Object.entries(shapes).map(([n, s]) => [n, T.tensor(values[n]!, s, { backend })]),
          );
          const tg = T.tensor(targets, [120], { dtype: 'i32', backend });
          const loss = (p: Record<string, T.Tensor>): T.Tensor => {
            const y = T.matmul(p.a!, p.b!);
            const att = T.causalAttention(p.q!, p.k!, p.v!);
            const n = T.rmsNorm(T.add(p.x!, p.x!), p.w!);
            const lp = T.tokenLogProbs(p.l!, tg, 1.3);
            return T.add(T.add(T.sum(T.mul(y, y)), T.sum(T.mul(att, att))), T.add(T.sum(T.mul(n, n)), T.sum(lp)));
          };
          const [value, grads] = T.valueAndGrad(loss)(t);
          const ss = T.sumSquares(Object.values(grads));
          return [value, ss, ...Object.values(grads)].map((g) => Array.from(g.dataSync()));
        }),
      );
      expect(results[1]).toEqual(results[0]);
      expect(results[2]).toEqual(results[0]);
      // The threads did the work: every kernel call of the 2- and 3-thread backends was split, none of the 1-thread's.
      const split = backends.map((b, i) => b.poolStats().parallelRuns - runs[i]!);
      expect(split[0]).toBe(0);
      expect(split[1]).toBeGreaterThan(20);
      expect(split[2]).toBe(split[1]);
    });

    it('a split call is cut into one part per thread, each run once, by a worker or by the calling thread', async () => {
      const b = backends[2]!;
      await b.whenReady();
      const before = b.poolStats();
      const x = T.randn([300, 64], new T.Rng(3), { backend: b });
      const products = Array.from({ length: 40 }, () => T.matmul(x, x, { transB: true }));
      const after = b.poolStats();
      const calls = after.parallelRuns - before.parallelRuns;
      const byWorkers = after.workerParts - before.workerParts;
      const byCaller = after.callerParts - before.callerParts;
      expect(calls).toBe(40);
      expect(byWorkers + byCaller).toBe(3 * calls);
      T.dispose([x, ...products]);
    });

    it('a split call below minWakeWork leaves a sleeping worker asleep: the calling thread runs its parts', async () => {
      const b = open({ threads: 2, minParallelWork: 0, minWakeWork: Number.POSITIVE_INFINITY });
      await b.whenReady();
      const x = T.randn([200, 64], new T.Rng(4), { backend: b });
      // The worker polls for tens of microseconds after its last job, then sleeps.
      await new Promise((r) => setTimeout(r, 50));
      const before = b.poolStats();
      const products = Array.from({ length: 40 }, () => T.matmul(x, x, { transB: true }));
      const after = b.poolStats();
      expect(after.parallelRuns - before.parallelRuns).toBe(40);
      expect(after.workerParts - before.workerParts).toBe(0);
      expect(after.callerParts - before.callerParts).toBe(80);
      T.dispose([x, ...products]);
      b.dispose();
    });

    it('what a WebAssembly kernel does not cover runs the reference kernel, and the counter shows it', () => {
      const b = backends[1]!;
      T.resetFallbackCounts(b);
      T.tidy(() => {
        const x32 = T.ones([4, 4], { backend: b });
        T.matmul(x32, x32);
        T.rmsNorm(x32, T.ones([4], { backend: b }));
      });
      expect(T.fallbackCounts(b).matmul).toBeUndefined();
      expect(T.fallbackCounts(b).rmsNorm).toBeUndefined();
      T.tidy(() => {
        const x64 = T.ones([4, 4], { backend: b, dtype: 'f64' });
        const y = T.matmul(x64, x64);
        expect(y.dataSync()[0]).toBe(4);
        const q = T.ones([1, 2, 1, 3], { backend: b });
        T.causalAttention(q, q, q); // head size 3: not a multiple of 4
      });
      expect(T.fallbackCounts(b).matmul).toBe(1);
      expect(T.fallbackCounts(b).attention).toBe(1);
    });

    it('a steady training step carves no new memory: every block comes back from the pool', () => {
      const b = backends[1]!;
      const rng = new T.Rng(3);
      let params = { w: T.randn([32, 48], rng, { backend: b }), u: T.randn([48, 16], rng, { backend: b }) };
      let opt = T.adamwInit(params);
      const x = T.randn([20, 32], rng, { backend: b });
      const step = (): void => {
        const next = T.tidy(() => {
          const [, grads] = T.valueAndGrad((p: typeof params) =>
            T.mean(T.square(T.matmul(T.tanh(T.matmul(x, p.w)), p.u))),
          )(params);
          const s = T.adamwStep(params, grads, opt, { lr: 1e-2, maxGradNorm: 1 });
          return { params: s.params, opt: s.state };
        });
        T.dispose([params, opt]);
        params = next.params as typeof params;
        opt = next.opt;
      };
      for (let i = 0; i < 3; i++) step();
      const before = b.poolStats();
      const mem = b.memory();
      for (let i = 0; i < 5; i++) step();
      const after = b.poolStats();
      expect(after.carved).toBe(before.carved);
      expect(after.heapBytes).toBe(before.heapBytes);
      expect(after.reused).toBeGreaterThan(before.reused);
      expect(b.memory()).toEqual(mem);
      T.dispose([params, opt, x]);
    });

    it('refuses a thread count that is not a whole number >= 1', () => {
      expect(() => new T.CpuBackend({ threads: 0 })).toThrow(/threads/);
      expect(() => new T.CpuBackend({ threads: 1.5 })).toThrow(/threads/);
    });

    it('reads copy out of the shared memory (a read survives the tensor and a reuse of its block)', () => {
      const b = backends[1]!;
      const t = T.tensor([1, 2, 3], [3], { backend: b });
      const r = t.dataSync();
      t.dispose();
      const u = T.tensor([7, 8, 9], [3], { backend: b });
      expect(Array.from(r)).toEqual([1, 2, 3]);
      expect(r.buffer).not.toBeInstanceOf(SharedArrayBuffer);
      u.dispose();
    });
  });

  // The reference backend is the oracle here: make sure the comparisons above did not run it against itself.
  it('the comparisons ran the CPU backend against the reference backend', () => {
    expect(cpu.name).toBe('cpu');
    expect(reference.name).toBe('reference');
    expect(cpu.memory64).toBe(memory64);
    if (memory64) {
      // The tensors lay past 4 GiB: an address truncated to 32 bits anywhere would have read other memory.
      const t = T.zeros([4], { backend: cpu });
      expect((t.storageFor('probe') as unknown as Float32Array).byteOffset).toBeGreaterThan(2 ** 32);
      t.dispose();
    }
  });

  describe(`cpu backend (${build}) without shared memory (a page that is not cross-origin isolated)`, () => {
    it('runs the same kernels on one thread in an ordinary memory, with the same results', () => {
      const unshared = open({ threads: 2, sharedMemory: false });
      const shared = open({ threads: 2, minParallelWork: 0, minWakeWork: 0 });
      expect(unshared.threads).toBe(1);
      expect(unshared.maxMemoryBytes).toBeLessThan(shared.maxMemoryBytes);
      const run = (backend: T.Backend): number[][] =>
        T.tidy(() => {
          const rng = new T.Rng(11);
          const a = T.randn([37, 50], rng, { backend });
          const b = T.randn([50, 29], rng, { backend });
          const q = T.randn([1, 9, 2, 8], rng, { backend });
          const [value, grads] = T.valueAndGrad((p: T.Tensor[]) =>
            T.add(T.sum(T.square(T.matmul(p[0]!, p[1]!))), T.sum(T.causalAttention(p[2]!, p[2]!, p[2]!))),
          )([a, b, q]);
          return [value, ...grads].map((t) => Array.from(t.dataSync()));
        });
      expect(run(unshared)).toEqual(run(shared));
      expect(() => unshared.allocRaw('f32', 300 * 2 ** 20)).toThrow(/out of memory/);
      unshared.dispose();
    });
  });
}

/** Whether V8 emits a fused multiply-add for relaxed SIMD's madd here: x86 processors that list FMA3. */
export const fusedHardware = (): boolean =>
  process.arch === 'x64' && existsSync('/proc/cpuinfo') && /\bfma\b/.test(readFileSync('/proc/cpuinfo', 'utf8'));

/**
 * a * b + c rounded once to f32 (a fused multiply-add), from f32 inputs: a * b is exact in f64; the f64 sum s and
 * its error e (TwoSum) hold a * b + c exactly, and rounding s to f32 is right unless s is an f32 tie, where e decides.
 */
export function fmaF32(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const bv = s - p;
  const e = p - (s - bv) + (c - bv);
  const r = Math.fround(s);
  if (e === 0 || r === s) return r;
  // The other f32 on s's side of r, and the midpoint between them: only an exact tie is decided by e.
  const other = nextF32(r, s > r ? 1 : -1);
  if (s !== (r + other) / 2) return r;
  return e > 0 === other > r ? other : r;
}

function nextF32(x: number, dir: 1 | -1): number {
  const f = new Float32Array([x]);
  const u = new Int32Array(f.buffer);
  if (x === 0) u[0] = dir > 0 ? 1 : -2147483647;
  else u[0]! += x > 0 === dir > 0 ? 1 : -1;
  return f[0]!;
}

const f = Math.fround;

/** x rounded to an integer, halves to even (f32x4.nearest). */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}
