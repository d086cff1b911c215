import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from './helpers.js';

/**
 * `recordStep`: a function of tensors recorded once and replayed with no op layer in between. Its replays must
 * compute what the ops compute (the same kernels on the same values: bit for bit), keep every buffer they name
 * from the pool, put back the uploads the step overwrites, hand out outputs a later run does not touch, and refuse
 * what a replay cannot do.
 */
const bits = async (t: T.Tensor): Promise<number[]> => [...(await t.data())];

describeGpu('recordStep', (gpu) => {
  const config: T.TransformerConfig = {
    vocabSize: 64,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dFf: 64,
    maxSeqLen: 16,
    ropeTheta: 1e4,
    rmsEps: 1e-6,
  };
  const batch = T.packSequences(
    [
      [1, 2, 3],
      [4, 5],
    ],
    [
      [6, 7, 8, 9],
      [10, 11],
    ],
    0,
  );
  const lossAndGrads = (p: T.TransformerParams) => {
    const [loss, grads] = T.valueAndGrad((q: T.TransformerParams) => T.sftLoss(q, config, batch))(p);
    return { loss, grads };
  };

  it('an SFT loss and its gradients replay what the ops compute, bit for bit, as the parameters change', async () => {
    let params = T.initParams(config, new T.Rng(3), { backend: gpu });
    let opt = T.adamwInit(params);
    T.dispose(T.tidy(() => lossAndGrads(params)));
    await gpu.sync();
    const step = T.recordStep(gpu, lossAndGrads, params);
    for (let s = 0; s < 3; s++) {
      const counts0 = gpu.runtime.kernelCounts();
      const eager = T.tidy(() => lossAndGrads(params));
      const counts1 = gpu.runtime.kernelCounts();
      const before = gpu.stats();
      const replayed = step.run(params);
      const after = gpu.stats();
      const counts2 = gpu.runtime.kernelCounts();
      expect(after.dispatches - before.dispatches, 'dispatches a replay encodes').toBe(step.dispatches);
      expect(after.bindGroupsCreated - before.bindGroupsCreated, 'bind groups a replay creates').toBe(0);
      expect(after.pipelines - before.pipelines).toBe(0);
      // The same kernels as the op-by-op run, each as many times.
      const delta = (a: Map<string, number>, b: Map<string, number>) =>
        Object.fromEntries([...b].map(([k, n]) => [k, n - (a.get(k) ?? 0)]).filter(([, n]) => n !== 0));
      expect(delta(counts1, counts2)).toEqual(delta(counts0, counts1));
      const [want, got] = [T.treeLeaves(eager), T.treeLeaves(replayed)];
      expect(got.map((t) => t.shape)).toEqual(want.map((t) => t.shape));
      for (let i = 0; i < want.length; i++)
        expect(await bits(got[i]!), `step ${s}, output ${i}`).toEqual(await bits(want[i]!));
      const next = T.tidy(() => T.adamwStep(params, replayed.grads, opt, { lr: 1e-2 }));
      T.dispose([eager, replayed, params, opt, next.gradNorm]);
      params = next.params;
      opt = next.state;
    }
    step.dispose();
    T.dispose([params, opt]);
  });

  it('an upload the step overwrites later is put back before each replay reads it', async () => {
    gpu.runtime.configure({ dispatchesPerSubmit: 1 });
    try {
      const n = 1237; // a size class of its own, so the upload takes the one buffer the step freed
      const constant = Float32Array.from({ length: n }, (_, i) => 100 + (i % 5));
      const f = (x: T.Tensor) => {
        const a = T.mul(x, 2);
        const c = T.neg(T.add(a, 1));
        a.dispose();
        T.sum(c); // another submit, whose output is of another size: a's buffer is now free for an upload
        const k = T.tensor(constant, [n], { backend: gpu });
        return T.add(k, c);
      };
      const step = T.recordStep(gpu, f, T.zeros([n], { backend: gpu }));
      for (const seed of [1, 2]) {
        const xs = Float32Array.from({ length: n }, (_, i) => ((i * seed) % 7) - 3);
        const x = T.tensor(xs, [n], { backend: gpu });
        const got = step.run(x);
        expect([...(await got.data())]).toEqual(Array.from(xs, (v, i) => constant[i]! - (2 * v + 1)));
        T.dispose([x, got]);
      }
      step.dispose();
    } finally {
      gpu.runtime.configure({ dispatchesPerSubmit: 32 });
    }
  });

  it('a tensor the step reads without being given it is kept from the pool until the step is disposed', async () => {
    const n = 1500;
    const held0 = gpu.stats().heldBuffers;
    const kValues = Float32Array.from({ length: n }, (_, i) => 1 + (i % 9));
    const k = T.tensor(kValues, [n], { backend: gpu });
    const step = T.recordStep(gpu, (x: T.Tensor) => T.mul(x, k), T.zeros([n], { backend: gpu }));
    expect(gpu.stats().heldBuffers).toBeGreaterThan(held0);
    k.dispose();
    await gpu.sync();
    // Work of the same size after k is gone: k's buffer, were it back in the pool, would be one of these.
    const others = Array.from({ length: 4 }, () => T.tensor(new Float32Array(n).fill(-7), [n], { backend: gpu }));
    const noise = others.map((o) => T.add(o, 1));
    const xs = Float32Array.from({ length: n }, (_, i) => (i % 4) - 1.5);
    const x = T.tensor(xs, [n], { backend: gpu });
    const got = step.run(x);
    expect([...(await got.data())]).toEqual(Array.from(xs, (v, i) => v * kValues[i]!));
    T.dispose([others, noise, x, got]);
    step.dispose();
    expect(gpu.stats().heldBuffers, 'held buffers after dispose').toBe(held0);
  });

  it("a run's outputs are its own: a later run does not change them", async () => {
    const step = T.recordStep(gpu, (x: T.Tensor) => ({ y: T.exp(x), z: T.sum(x) }), T.zeros([5], { backend: gpu }));
    const first = step.run(T.tensor([0, 1, 2, 3, 4], [5], { backend: gpu }));
    const second = step.run(T.tensor([1, 1, 1, 1, 1], [5], { backend: gpu }));
    expect(await first.z.item()).toBe(10);
    expect(await second.z.item()).toBe(5);
    const [y1, y2] = [await first.y.data(), await second.y.data()];
    [0, 1, 2, 3, 4].forEach((v, i) => expect(y1[i]).toBeCloseTo(Math.exp(v), 4));
    for (const v of y2) expect(v).toBeCloseTo(Math.E, 5);
    T.dispose([first, second]);
    step.dispose();
  });

  it('refuses a read or a wait inside the step, a step inside a step, other inputs, and a run after dispose', async () => {
    const x0 = T.zeros([2, 3], { backend: gpu });
    let read: Promise<unknown> | null = null;
    const reading = T.recordStep(
      gpu,
      (x: T.Tensor) => {
        const y = T.exp(x);
        read = y.data();
        return y;
      },
      x0,
    );
    await expect(read).rejects.toThrow(T.RecordingError);
    reading.dispose();
    expect(() => T.recordStep(gpu, (x: T.Tensor) => T.recordStep(gpu, T.exp, x).run(x), x0)).toThrow(
      /already being recorded/,
    );
    // A step that threw left nothing recording and nothing held.
    const held = gpu.stats().heldBuffers;
    expect(() =>
      T.recordStep(
        gpu,
        () => {
          throw new Error('boom');
        },
        x0,
      ),
    ).toThrow('boom');
    expect(gpu.stats().heldBuffers).toBe(held);
    const step = T.recordStep(gpu, (x: T.Tensor) => T.mul(x, 2), x0);
    expect(() => step.run(T.zeros([3, 2], { backend: gpu }))).toThrow(T.ShapeError);
    expect(() => step.run(T.zeros([2, 3], { backend: gpu, dtype: 'i32' }))).toThrow(T.DTypeError);
    expect(() => step.run([x0, x0] as unknown as T.Tensor)).toThrow(/2 input tensors, the recording has 1/);
    expect(() => step.run(T.zeros([2, 3]))).toThrow(T.BackendMismatchError);
    step.dispose();
    expect(() => step.run(x0)).toThrow(/run after dispose/);
    x0.dispose();
    await gpu.sync();
  });
});
