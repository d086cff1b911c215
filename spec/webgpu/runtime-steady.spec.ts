import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import {
  adamwInit,
  adamwStep,
  createKvCache,
  disposeCache,
  forwardWithCache,
  initParams,
  smallConfig,
  type TransformerParams,
} from '../../src/nn/index.js';
import { sampleRollouts, scoreLogProbs, sftBatch, sftExamples, sftLoss } from '../../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor } from '../../src/tasks/index.js';
import { TRAIN_DEFAULTS } from '../../src/training/index.js';
import { bufferOf } from '../../src/backends/webgpu/storage.js';
import { cpu, describeGpu } from './helpers.js';

/**
 * What the runtime's host-side caches and pool promise, as counters: a steady-state training step of the
 * trainer's default model creates no GPU buffer and gives the CPU backend's losses; kernels reuse a buffer freed
 * earlier in the same batch while uploads wait for the submit; repeated work creates no new bind groups; the
 * uniform store recycles without corrupting results; idle buffers are destroyed only past the cap and only when
 * unused, never a working set that repeats.
 */
const fresh = (opts: T.WebGpuBackendOptions = {}): Promise<T.WebGpuBackend> => T.createWebGpuBackend(opts);

describeGpu('webgpu runtime: steady state', (gpu) => {
  it('a default-model SFT step creates 0 buffers after warm-up (over the idle cap); losses match the CPU', async () => {
    // The idle cap far below the step's working set: the old pool destroyed and created buffers every step here.
    const g = await fresh({ maxIdleBytes: 64 * 1024 });
    const task = additionTask();
    const tok = tokenizerFor(task);
    const config = smallConfig(tok.vocabSize, { ...TRAIN_DEFAULTS.model });
    // 16 rows instead of the trainer's 64 keep it quick; buffers and dispatches do not depend on the row count.
    const batch = sftBatch(tok, sftExamples(task, sampleProblems(task, 16, new T.Rng(1))));
    const train = async (backend: T.Backend, steps: number, after?: (step: number) => void): Promise<number[]> => {
      let params: TransformerParams = initParams(config, new T.Rng(0), { backend });
      let opt = adamwInit(params);
      const losses: number[] = [];
      for (let s = 1; s <= steps; s++) {
        const next = T.tidy(() => {
          const [loss, grads] = T.valueAndGrad((p: TransformerParams) => sftLoss(p, config, batch))(params);
          const stepped = adamwStep(params, grads, opt, { lr: 1e-3, maxGradNorm: TRAIN_DEFAULTS.maxGradNorm });
          return { params: stepped.params, opt: stepped.state, loss };
        });
        T.dispose([params, opt]);
        params = next.params;
        opt = next.opt;
        losses.push(await next.loss.item());
        next.loss.dispose();
        after?.(s);
      }
      T.dispose([params, opt]);
      return losses;
    };
    const snaps: T.RuntimeStats[] = [];
    const got = await train(g, 5, () => snaps.push(g.stats()));
    const want = await train(cpu, 5);
    const [, , s3, s4, s5] = snaps;
    expect(s4!.buffersCreated - s3!.buffersCreated, 'buffers created in step 4').toBe(0);
    expect(s5!.buffersCreated - s4!.buffersCreated, 'buffers created in step 5').toBe(0);
    expect(s5!.dispatches - s4!.dispatches, 'dispatches per step are the same every step').toBe(
      s4!.dispatches - s3!.dispatches,
    );
    got.forEach((l, i) =>
      expect(Math.abs(l - want[i]!), `loss at step ${i + 1}: ${l} vs ${want[i]}`).toBeLessThan(
        1e-4 * Math.abs(want[i]!),
      ),
    );
    expect(got[4]!).toBeLessThan(got[0]!);
    expect(s5!.idleBytes, 'the working set is over the cap').toBeGreaterThan(64 * 1024);
    g.dispose();
  });

  it('a kernel reuses a buffer freed earlier in its batch; a host write first submits its readers', async () => {
    const b = await fresh({ dispatchesPerSubmit: 10_000 });
    const x = T.tensor([1, 2, 3, 4], [4], { backend: b });
    const xBuffer = bufferOf(x.storageFor('test'));
    const y = T.neg(x);
    x.dispose(); // freed while the neg that reads it is unsubmitted
    const z = T.exp(y); // a kernel output: takes x's buffer at once
    expect(bufferOf(z.storageFor('test'))).toBe(xBuffer);
    // An upload never takes a buffer that unsubmitted commands use.
    const upload = T.tensor([7, 7, 7, 7], [4], { backend: b });
    expect(bufferOf(upload.storageFor('test'))).not.toBe(xBuffer);
    // A raw write into a buffer a kernel of this batch was given must come after the batch.
    const submits = b.stats().submits;
    const w = T.sub(y, y);
    const wBuffer = bufferOf(w.storageFor('test'));
    const u = T.add(y, y); // reads y: must see -x, written before the host write below
    z.dispose();
    w.dispose();
    const reused = b.runtime.alloc(16);
    expect([xBuffer, wBuffer]).toContain(reused);
    b.runtime.write(reused, new Float32Array([9, 9, 9, 9]));
    expect(b.stats().submits).toBe(submits + 1);
    expect([...(await u.data())]).toEqual([-2, -4, -6, -8]);
    expect([...(await y.data())]).toEqual([-1, -2, -3, -4]);
    expect([...(await upload.data())]).toEqual([7, 7, 7, 7]);
    b.runtime.release(reused);
    T.dispose([y, u, upload]);
    b.dispose();
  });

  it('zero-size outputs are allocated without a dispatch', async () => {
    const x = T.zeros([0, 3], { backend: gpu });
    const before = gpu.stats().dispatches;
    const y = T.exp(T.add(x, x));
    const s = T.sum(x, [0]);
    expect(gpu.stats().dispatches - before).toBe(1); // only the sum over an empty axis has work (its 3 zeros)
    expect(y.shape).toEqual([0, 3]);
    expect([...(await s.data())]).toEqual([0, 0, 0]);
    T.dispose([x, y, s]);
  });

  it('repeating the same work creates no bind groups and no buffers', async () => {
    const one = T.ones([256], { backend: gpu });
    const chain = async (): Promise<number> => {
      let x = T.zeros([256], { backend: gpu });
      for (let i = 0; i < 40; i++) {
        const y = i % 2 ? T.mul(x, one) : T.add(x, one);
        x.dispose();
        x = y;
      }
      const v = (await x.data())[0]!;
      x.dispose();
      return v;
    };
    await chain();
    await chain();
    const before = gpu.stats();
    expect(await chain()).toBe(20);
    const after = gpu.stats();
    expect(after.bindGroupsCreated - before.bindGroupsCreated).toBe(0);
    expect(after.buffersCreated - before.buffersCreated).toBe(0);
    expect(after.dispatches - before.dispatches).toBe(41);
    one.dispose();
  });

  it('the uniform store recycles after thousands of distinct uniform blocks and results stay right', async () => {
    const b = await fresh();
    const kept: [number, T.Tensor][] = [];
    for (let v = 0; v < 6000; v++) {
      const t = T.full([4], v, { backend: b }); // the fill value is in the uniform block: 6000 distinct blocks
      if (v % 750 === 0 || v > 5990) kept.push([v, t]);
      else t.dispose();
    }
    for (const [v, t] of kept) expect([...(await t.data())], `fill ${v}`).toEqual([v, v, v, v]);
    // 6000 blocks at 256-byte alignment (llvmpipe's; less elsewhere) would need 24 arenas of 64 KiB; recycling keeps
    // them at the cap (16) plus one. What is not a tensor buffer is an arena or the one staging buffer for reads.
    const s = b.stats();
    expect(s.buffersCreated - s.created).toBeLessThanOrEqual(18);
    T.dispose(kept.map(([, t]) => t));
    b.dispose();
  });

  it('idle buffers past the cap are destroyed only when unused for a few reads, never a repeating set', async () => {
    const b = await fresh({ maxIdleBytes: 4096 });
    const big = (): T.Tensor => T.zeros([4096], { backend: b }); // 16 KiB each: over the cap when idle
    const stepLike = async (): Promise<void> => {
      const s = T.tidy(() => {
        const xs = [big(), big(), big()];
        return T.sum(T.add(T.add(xs[0]!, xs[1]!), xs[2]!));
      });
      await s.data();
      s.dispose();
    };
    await stepLike();
    const warm = b.stats();
    for (let i = 0; i < 8; i++) await stepLike();
    const steady = b.stats();
    expect(steady.destroyed, 'a working set reused at every read is never destroyed').toBe(0);
    expect(steady.buffersCreated).toBe(warm.buffersCreated);
    // Now the working set changes and grows (a new size at every read): the old 16 KiB buffers go unused and are
    // destroyed once they have sat idle for a few reads.
    for (let i = 1; i <= 6; i++) {
      const small = T.ones([4 * i], { backend: b });
      await small.data();
      small.dispose();
    }
    expect(b.stats().destroyed).toBeGreaterThan(0);
    expect(b.stats().idleBytes).toBeLessThanOrEqual(4096);
    b.dispose();
  });

  it('two working sets that alternate (a step, then many reads that create nothing) are never destroyed', async () => {
    // An RL loop: a training step, then sampling with a read per token. Reads alone used to destroy the step's
    // idle buffers past the cap (unused for 4 reads), so every iteration destroyed and created them again.
    const b = await fresh({ maxIdleBytes: 4096 });
    const big = (): T.Tensor => T.zeros([4096], { backend: b });
    const token = T.ones([8], { backend: b });
    const iteration = async (): Promise<void> => {
      const s = T.tidy(() => T.sum(T.add(T.add(big(), big()), big())));
      await s.data();
      s.dispose();
      for (let i = 0; i < 8; i++) {
        const t = T.mul(token, token);
        await t.data();
        t.dispose();
      }
    };
    await iteration();
    const warm = b.stats();
    for (let i = 0; i < 3; i++) await iteration();
    expect(b.stats().destroyed - warm.destroyed).toBe(0);
    expect(b.stats().buffersCreated).toBe(warm.buffersCreated);
    token.dispose();
    b.dispose();
  });

  it('an RL iteration (sampling, a read per token, then a training step) destroys and creates nothing after two', async () => {
    const b = await fresh({ maxIdleBytes: 4096 });
    const tok = tokenizerFor(additionTask());
    const config = smallConfig(tok.vocabSize, {
      dModel: 32,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dFf: 64,
      maxSeqLen: 24,
    });
    const params = initParams(config, new T.Rng(2), { backend: b, std: 0.3 });
    const opt = adamwInit(params);
    // The same rollouts every iteration (same weights, same seed), so every iteration has the same shapes.
    const iteration = async (): Promise<void> => {
      const rollouts = await sampleRollouts(params, config, tok, ['12+34=', '7+58='], new T.Rng(4), {
        groupSize: 4,
        maxNewTokens: 6,
        temperature: 1,
      });
      const out = T.tidy(() => {
        const [loss, grads] = T.valueAndGrad((p: TransformerParams) =>
          T.neg(T.sum(scoreLogProbs(p, config, rollouts))),
        )(params);
        return { loss, stepped: adamwStep(params, grads, opt, { lr: 1e-3 }) };
      });
      await out.loss.data();
      T.dispose(out);
    };
    // Two to warm up: the first step, growing the pool, destroys the sampler's prefill buffers (unused for the
    // decode's reads), which the second iteration's sampling creates again.
    await iteration();
    await iteration();
    const warm = b.stats();
    for (let i = 0; i < 3; i++) await iteration();
    expect(b.stats().destroyed - warm.destroyed, 'buffers destroyed after warm-up').toBe(0);
    expect(b.stats().buffersCreated - warm.buffersCreated, 'buffers created after warm-up').toBe(0);
    T.dispose([params, opt]);
    b.dispose();
  });

  it('profiling: GPU times per kernel with timestamp-query, none without; dispatch counts always', async () => {
    const b = await fresh({ profile: true });
    const x = T.ones([64], { backend: b });
    const y = T.add(x, x);
    await y.data();
    expect(b.runtime.kernelCounts().get('add')).toBe(1);
    const times = await b.runtime.kernelTimes();
    expect(b.runtime.profiling).toBe(b.runtime.device.features.has('timestamp-query'));
    if (b.runtime.profiling) {
      const add = times?.find((t) => t.kernel === 'add');
      expect(add?.dispatches).toBe(1);
      expect(add!.gpuMs).toBeGreaterThanOrEqual(0);
    } else expect(times).toBeNull();
    T.dispose([x, y]);
    b.dispose();
  });

  it('KV-cache decoding with a preallocated cache: every decode step after the first creates 0 buffers', async () => {
    const b = await fresh();
    const task = additionTask();
    const config = smallConfig(tokenizerFor(task).vocabSize, { ...TRAIN_DEFAULTS.model });
    const rows = 4;
    const params = initParams(config, new T.Rng(0), { backend: b });
    const ids = (n: number, step: number): T.Tensor =>
      T.tensor(
        Array.from({ length: rows * n }, (_, i) => (i * 7 + step) % config.vocabSize),
        [rows, n],
        { dtype: 'i32', backend: b },
      );
    // As the sampler does: a prefill into a cache with room for every step, then one position per step.
    let { logits, cache } = T.tidy(() =>
      forwardWithCache(params, config, ids(6, 0), createKvCache(params, config, rows, 16)),
    );
    const created: number[] = [];
    for (let step = 1; step <= 8; step++) {
      await logits.data();
      logits.dispose();
      const before = b.stats().buffersCreated;
      const prev = cache;
      ({ logits, cache } = T.tidy(() => forwardWithCache(params, config, ids(1, step), prev)));
      disposeCache(prev);
      created.push(b.stats().buffersCreated - before);
    }
    expect(created.slice(1), `buffers created per decode step: ${created.join(', ')}`).toEqual(Array(7).fill(0));
    logits.dispose();
    disposeCache(cache);
    T.dispose(params);
    b.dispose();
  });
});
