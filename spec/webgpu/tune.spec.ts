import { ATTENTION_SPLITS, attentionSplitName } from '../../src/backends/webgpu/kernels/attention.js';
import { setMatmulKernel } from '../../src/backends/webgpu/kernels/matmul.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { Tuner, type TuneJob, type TuneTrial } from '../../src/backends/webgpu/tuner.js';
import { expectClose, gpu as untuned, reference, weights } from './helpers.js';

/**
 * Kernels that tune themselves (tuner.ts), the one WebGPU spec that runs with tuning on (vitest sets
 * RLVR_TUNE=off for the others). On the device: a class met for the first time runs the default and is tuned at
 * the next read, never inside the work that met it; later launches run the choice, with the reference's results;
 * the choice is in the adapter's cache file, which a later run loads instead of tuning; a warmed step with
 * tuning on has the counters and losses of one with tuning off. Without the device: the tuner rejects a
 * candidate whose result disagrees with the default's however fast it is, and RLVR_TUNE=off never tunes.
 * Every candidate's correctness on its own is matmul.spec's (each configuration against the reference).
 */
const cacheDir = mkdtempSync(join(tmpdir(), 'rlvr-tune-'));
const tuned = untuned ? await T.createWebGpuBackend({ tune: true, tuneCacheDir: cacheDir }) : null;

/** Operands of an m x k by k x n product (weights from seeds `seed` and `seed + 1`) and the reference's result. */
async function referenceProduct(m: number, k: number, n: number, seed: number) {
  const av = weights(m * k, seed);
  const bv = weights(k * n, seed + 1);
  const want = await T.matmul(
    T.tensor(av, [m, k], { backend: reference }),
    T.tensor(bv, [k, n], { backend: reference }),
  ).data();
  return { av, bv, want };
}

/**
 * That product on a tuning backend whose class it is the first of: it must agree with the reference's and tune
 * exactly one class. Returns the operands, the product and the reference's values.
 */
async function firstTunedProduct(what: string, on: T.WebGpuBackend, m: number, k: number, n: number, seed: number) {
  const { av, bv, want } = await referenceProduct(m, k, n, seed);
  const x = T.tensor(av, [m, k], { backend: on });
  const y = T.tensor(bv, [k, n], { backend: on });
  const before = on.runtime.tuner.tuned;
  const c = T.matmul(x, y);
  expectClose(what, await c.data(), want, { atol: 1e-6 * k, rtol: 1e-6 });
  expect(on.runtime.tuner.tuned).toBe(before + 1);
  return { x, y, c, want };
}

afterAll(async () => {
  if (tuned) {
    await tuned.sync();
    expect(tuned.runtime.error).toBeNull();
    tuned.dispose();
  }
  rmSync(cacheDir, { recursive: true, force: true });
});

describe.skipIf(tuned === null)('webgpu tuning on the device', () => {
  const b = tuned!;

  it('a matmul class is tuned at the next read, not inside the work; later launches run the choice', async () => {
    const [m, k, n] = [128, 96, 160]; // 2M multiply-adds: over the size worth tuning
    const { av, bv, want } = await referenceProduct(m, k, n, 1);
    const x = T.tensor(av, [m, k], { backend: b });
    const y = T.tensor(bv, [k, n], { backend: b });
    const d0 = b.stats().dispatches;
    const first = T.matmul(x, y);
    expect(b.stats().dispatches - d0, 'the first meeting runs one dispatch (the default)').toBe(1);
    expect(b.runtime.tuner.tuned).toBe(0);
    expectClose('first', await first.data(), want, { atol: 1e-6 * k, rtol: 1e-6 });
    expect(b.runtime.tuner.tuned, 'tuned at the read').toBe(1);
    const [choice] = b.runtime.tuner.report();
    expect(choice!.kernel).toBe('matmul');
    expect(choice!.rejected).toEqual([]);
    // Every candidate that fits was timed, the default first, and the choice is the fastest of them.
    const times = Object.entries(choice!.ms);
    expect(times.length).toBeGreaterThan(1);
    expect(times.every(([, t]) => t > 0 && Number.isFinite(t))).toBe(true);
    expect(choice!.ms[choice!.choice]).toBe(Math.min(...times.map(([, t]) => t)));

    const d1 = b.stats().dispatches;
    const again = T.matmul(x, y);
    expect(b.stats().dispatches - d1).toBe(1);
    expectClose('again', await again.data(), want, { atol: 1e-6 * k, rtol: 1e-6 });
    expect(b.runtime.tuner.tuned, 'no second tuning of a class').toBe(1);
    T.dispose([x, y, first, again]);

    // The adapter's file holds the choice; a later run (a new tuner on that file) picks it without tuning.
    const file = b.runtime.tuner.cacheFile!;
    expect(JSON.parse(readFileSync(file, 'utf8')).choices).toContainEqual(choice);
    const later = new Tuner(b.adapter.summary, choice!.timer, { tune: true, tuneCacheDir: cacheDir });
    await later.load();
    const job: TuneJob = {
      kernel: 'matmul',
      shapeClass: choice!.shapeClass,
      candidates: Object.keys(choice!.ms),
      trial: () => {
        throw new Error('a loaded class is not tuned again');
      },
    };
    expect(later.pick(job)).toBe(choice!.choice);
    expect(later.due).toBe(false);
  });

  it('a tall matmul is compared on a capped copy of its class (M 4100 -> 2052) and timed on itself', async () => {
    const k = 8;
    const { x, y, c, want } = await firstTunedProduct('tall', b, 4100, k, 64, 4);
    const choice = b.runtime.tuner.report().find((r) => r.shapeClass.includes(':m13:'))!;
    expect(choice.rejected).toEqual([]);
    expect(Object.keys(choice.ms).length).toBeGreaterThan(1);
    const again = T.matmul(x, y);
    expectClose('tall again', await again.data(), want, { atol: 1e-6 * k, rtol: 1e-6 });
    T.dispose([x, y, c, again]);
  });

  it('split-K is offered for a small output over a long K (tiled family): each candidate agrees, none rejected', async () => {
    // 64 x 16 outputs (one tile) over K = 2,048: chunks of at least 128 allow 4, 8 and 16 splits, not 32.
    const k = 2048;
    setMatmulKernel('tiled');
    try {
      const { x, y, c, want } = await firstTunedProduct('split-K class', b, 64, k, 16, 6);
      const choice = b.runtime.tuner
        .report()
        .find((r) => r.shapeClass.startsWith('tiled:') && r.shapeClass.includes(':k11:'))!;
      expect(choice.rejected).toEqual([]);
      expect(choice.shapeClass, 'a class of its own beside an older cache').toMatch(/:sk$/);
      const split = Object.keys(choice.ms).filter((name) => name.includes('/k'));
      expect(split.sort()).toEqual(['Lsp/k16', 'Lsp/k4', 'Lsp/k8', 'M16/k8', 'N16/k8', 'XLk16sp/k4']);
      const again = T.matmul(x, y);
      expectClose('split-K class again', await again.data(), want, { atol: 1e-6 * k, rtol: 1e-6 });
      T.dispose([x, y, c, again]);
    } finally {
      setMatmulKernel(null);
    }
  });

  it('a row kernel (softmax over 64 rows of 4096) is tuned over its workgroup sizes at the read', async () => {
    const xv = weights(64 * 4096, 3).map((v) => Math.fround(4 * v));
    const want = await T.softmax(T.tensor(xv, [64, 4096], { backend: reference })).data();
    const x = T.tensor(xv, [64, 4096], { backend: b });
    const before = b.runtime.tuner.tuned;
    const first = T.softmax(x);
    expect(b.runtime.tuner.tuned).toBe(before);
    // rows.spec.ts's softmax tolerance (exp, an f32 sum, a divide).
    expectClose('first', await first.data(), want, { atol: 1e-6, rtol: 4e-6 });
    expect(b.runtime.tuner.tuned).toBe(before + 1);
    const choice = b.runtime.tuner.report().find((c) => c.kernel === 'softmax')!;
    expect(choice.shapeClass).toBe('softmax_tree:r6:n12');
    expect(choice.fallback, 'the default').toBe('64');
    expect(Object.keys(choice.ms).sort()).toEqual(['128', '256', '64']);
    expect(choice.rejected).toEqual([]);
    const again = T.softmax(x);
    expectClose('again', await again.data(), want, { atol: 1e-6, rtol: 4e-6 });
    T.dispose([x, first, again]);
  });

  it('attention forward and backward are tuned over rows a workgroup and threads a row; no candidate rejected', async () => {
    const shape = [1, 128, 4, 16]; // 2^20 multiply-adds of Q K^T: the size worth tuning
    const vals = [1, 2, 3].map((seed) => weights(128 * 64, seed).map((v) => Math.fround(0.5 * v)));
    const run = async (backend: T.Backend) => {
      const [q, k, v] = vals.map((xs) => T.tensor(xs, shape, { backend }));
      const [out, grads] = T.valueAndGrad((qq: T.Tensor) => T.sum(T.mul(T.causalAttention(qq, k!, v!), 0.5)))(q!);
      const got = [await out.data(), await grads.data()];
      T.dispose([q, k, v, out, grads]);
      return got;
    };
    const want = await run(reference);
    const before = b.runtime.tuner.tuned;
    const got = await run(b);
    // fused.spec.ts's attention tolerance.
    got.forEach((g, i) => expectClose(`attention ${i}`, g, want[i]!, { atol: 2e-5, rtol: 2e-4 }));
    const classes = b.runtime.tuner.report().filter((c) => c.kernel.startsWith('attention'));
    expect(b.runtime.tuner.tuned - before).toBe(3);
    expect(classes.map((c) => c.kernel).sort()).toEqual(['attention', 'attentionBackward', 'attentionBackward']);
    for (const c of classes) {
      expect(c.rejected, `${c.kernel} ${c.shapeClass}`).toEqual([]);
      expect(c.fallback).toBe('64');
      expect(Object.keys(c.ms).sort()).toEqual(ATTENTION_SPLITS.map(attentionSplitName).sort());
    }
    const again = await run(b);
    again.forEach((g, i) => expectClose(`attention again ${i}`, g, want[i]!, { atol: 2e-5, rtol: 2e-4 }));
  });

  it('a warmed SFT step with tuning on: one read-back, no tuning, 0 buffers, the losses of tuning off', async () => {
    const config = T.smallConfig(64, { dModel: 128, nLayers: 1, nHeads: 4, nKvHeads: 4, dFf: 384, maxSeqLen: 32 });
    const ids = (n: number, s: number): number[] => Array.from({ length: n }, (_, i) => 1 + ((i * 7 + s) % 63));
    const batch = T.packSequences(
      [ids(16, 1), ids(16, 2), ids(16, 3), ids(16, 4)],
      [ids(16, 5), ids(16, 6), ids(16, 7), ids(16, 8)],
      0,
    );
    const run = async (backend: T.WebGpuBackend) => {
      let params = T.initParams(config, new T.Rng(0), { backend });
      let opt = T.adamwInit(params);
      const steps = [];
      for (let s = 0; s < 3; s++) {
        const before = backend.stats();
        const tunedBefore = backend.runtime.tuner.tuned;
        const out = T.tidy(() => {
          const [loss, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sftLoss(p, config, batch))(params);
          return { loss, ...T.adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: 1 }) };
        });
        const loss = (await out.loss.data())[0]!;
        const after = backend.stats();
        T.dispose([params, opt, out.loss, out.gradNorm]);
        params = out.params;
        opt = out.state;
        steps.push({
          loss,
          tunings: backend.runtime.tuner.tuned - tunedBefore,
          readBacks: after.readBacks - before.readBacks,
          buffersCreated: after.buffersCreated - before.buffersCreated,
        });
      }
      T.dispose([params, opt]);
      return steps;
    };
    const on = await run(b);
    const off = await run(untuned!);
    expect(on[0]!.tunings, 'the first step meets classes worth tuning').toBeGreaterThan(0);
    for (const s of [1, 2]) {
      expect(on[s]!.tunings, `tunings in step ${s + 1}`).toBe(0);
      expect(on[s]!.readBacks, `read-backs in step ${s + 1}`).toBe(1);
    }
    expect(on[2]!.buffersCreated, 'buffers created in step 3').toBe(0);
    // Tuning changes which configuration runs, never what it computes (each sums K in the same order).
    expectClose(
      'losses, tuning on vs off',
      on.map((s) => s.loss),
      off.map((s) => s.loss),
      { atol: 1e-5, rtol: 1e-5 },
    );
  });
});

/** A trial over made-up candidates: each one's output and time given. */
const fakeJob = (outputs: Record<string, number[]>, ms: Record<string, number>): TuneJob => ({
  kernel: 'fake',
  shapeClass: 'c',
  candidates: Object.keys(outputs),
  trial: (): TuneTrial => ({
    result: async (c) => Float32Array.from(outputs[c]!),
    time: async (c) => ms[c]!,
    agree: (want, got) => want.every((w, i) => Math.abs(got[i]! - w) <= 1e-6),
    dispose: () => {},
  }),
});

describe('the tuner', () => {
  it('rejects a candidate whose result disagrees with the default, however fast; keeps the fastest of the rest', async () => {
    const t = new Tuner('test adapter', 'wall-clock', { tune: true, tuneCacheDir: null });
    const job = fakeJob(
      { base: [1, 2], wrong: [1, 2.5], dropped: [0, 0], nan: [Number.NaN, 2], good: [1, 2], slow: [1, 2] },
      { base: 3, wrong: 0.1, dropped: 0.01, nan: 0.2, good: 2, slow: 5 },
    );
    expect(t.pick(job), 'the default while untuned').toBe('base');
    expect(t.due).toBe(true);
    await t.run();
    expect(t.pick(job)).toBe('good');
    const [choice] = t.report();
    expect(choice!.rejected).toEqual(['wrong', 'dropped', 'nan']);
    expect(Object.keys(choice!.ms)).toEqual(['base', 'good', 'slow']);
  });

  it('with tuning off (RLVR_TUNE=off, as the specs run) the default always, nothing queued', () => {
    const t = new Tuner('test adapter', 'wall-clock');
    expect(t.enabled).toBe(false);
    expect(t.pick(fakeJob({ base: [1], fast: [1] }, { base: 2, fast: 1 }))).toBe('base');
    expect(t.due).toBe(false);
  });
});
