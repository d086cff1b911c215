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

  it('a whole step, AdamW included, replays the op-by-op steps bit for bit (its values from a schedule tensor)', async () => {
    const cfg: T.AdamWConfig = { lr: 0, maxGradNorm: 1, schedule: { peakLr: 0.02, warmupSteps: 2, totalSteps: 8 } };
    type State = { params: T.TransformerParams; m: T.TransformerParams; v: T.TransformerParams; schedule: T.Tensor };
    const step = (s: State) => {
      const { loss, grads } = lossAndGrads(s.params);
      // The host's lr and count are placeholders: the kernel reads this step's from `schedule`.
      const host = { step: 0, m: s.m, v: s.v };
      const hostCfg = { ...cfg, schedule: undefined, lr: 123 };
      // Donated: the update lands in the inputs' own slots, which the step lends out instead of copying.
      const out = T.adamwStep(s.params, grads, host, hostCfg, { schedule: s.schedule, donate: true });
      return { loss, params: out.params, m: out.state.m, v: out.state.v };
    };
    const init = () => T.initParams(config, new T.Rng(5), { backend: gpu });
    const scheduleAt = (n: number) => T.tensor(T.adamwScheduleValues(n, cfg), [4], { backend: gpu });
    // Op by op, AdamW's values as uniforms from the host's step count.
    let params = init();
    let opt = T.adamwInit(params);
    const eagerLosses: number[] = [];
    for (let s = 0; s < 3; s++) {
      const out = T.tidy(() => {
        const { loss, grads } = lossAndGrads(params);
        return { loss, ...T.adamwStep(params, grads, opt, cfg) };
      });
      eagerLosses.push(...(await out.loss.data()));
      T.dispose([params, opt, out.loss, out.gradNorm]);
      params = out.params;
      opt = out.state;
    }
    // Recorded at step 0, replayed for steps 0, 1, 2.
    const p0 = init();
    const zeros = () => T.treeMap(p0, (p) => T.zerosLike(p));
    let state: State = { params: p0, m: zeros(), v: zeros(), schedule: scheduleAt(0) };
    const recorded = T.recordStep(gpu, step, state);
    const replayedLosses: number[] = [];
    for (let s = 0; s < 3; s++) {
      const given = state;
      const out = recorded.run(given);
      replayedLosses.push(...(await out.loss.data()));
      // From the second run on, the parameters given were the last run's lent ones: taken back, not copied.
      if (s > 0) expect(T.treeLeaves(given.params).every((t) => t.isDonated)).toBe(true);
      T.dispose([given, out.loss]);
      state = { params: out.params, m: out.m, v: out.v, schedule: scheduleAt(s + 1) };
    }
    expect(replayedLosses).toEqual(eagerLosses);
    const [want, got] = [T.treeLeaves(params), T.treeLeaves(state.params)];
    for (let i = 0; i < want.length; i++) expect(await bits(got[i]!), `parameter ${i}`).toEqual(await bits(want[i]!));
    recorded.dispose();
    T.dispose([params, opt, state]);
  });

  it("reads each run's batch when the batch is an input (batchTensors), as the ops would", async () => {
    const params = T.initParams(config, new T.Rng(7), { backend: gpu });
    const shape = { promptLen: 3, completionLen: 4 };
    const batchA = T.packSequences(
      [
        [1, 2, 3],
        [4, 5],
      ],
      [
        [6, 7, 8, 9],
        [10, 11],
      ],
      0,
      shape,
    );
    const batchB = T.packSequences(
      [
        [12, 13],
        [14, 15, 16],
      ],
      [
        [17, 18],
        [19, 20, 21],
      ],
      0,
      shape,
    );
    const f = (s: { params: T.TransformerParams; batch: T.BatchTensors }) => {
      const [loss, grads] = T.valueAndGrad((q: T.TransformerParams) => T.sftLoss(q, config, s.batch))(s.params);
      return { loss, grads };
    };
    const [a, b] = [T.batchTensors(batchA, gpu), T.batchTensors(batchB, gpu)];
    const step = T.recordStep(gpu, f, { params, batch: a });
    for (const batch of [b, a]) {
      const eager = T.tidy(() => f({ params, batch }));
      const replayed = step.run({ params, batch });
      const [want, got] = [T.treeLeaves(eager), T.treeLeaves(replayed)];
      for (let i = 0; i < want.length; i++) expect(await bits(got[i]!), `output ${i}`).toEqual(await bits(want[i]!));
      T.dispose([eager, replayed]);
    }
    // The batch matters: the two runs' losses differ.
    const [la, lb] = [step.run({ params, batch: a }), step.run({ params, batch: b })];
    expect(await la.loss.item()).not.toBe(await lb.loss.item());
    T.dispose([la, lb, a, b, params]);
    step.dispose();
  });

  it('lends an output written into its input slot, takes it back, and refuses to overwrite one kept alive', async () => {
    const n = 6;
    const grad = T.tensor([1, -2, 3, -4, 5, -6], [n], { backend: gpu });
    const cfg: T.AdamWConfig = { lr: 0.1 };
    const f = (s: { p: T.Tensor; m: T.Tensor; v: T.Tensor; schedule: T.Tensor }) => {
      const out = T.adamwStep(s.p, grad, { step: 0, m: s.m, v: s.v }, cfg, { schedule: s.schedule, donate: true });
      return { p: out.params, m: out.state.m, v: out.state.v };
    };
    const sched = (k: number) => T.tensor(T.adamwScheduleValues(k, cfg), [4], { backend: gpu });
    const start = () => ({
      p: T.ones([n], { backend: gpu }),
      m: T.zeros([n], { backend: gpu }),
      v: T.zeros([n], { backend: gpu }),
    });
    const step = T.recordStep(gpu, f, { ...start(), schedule: sched(0) });
    // Op by op, for the values each run must give.
    let eager = start();
    const want: number[][] = [];
    for (let k = 0; k < 3; k++) {
      const out = T.tidy(() => T.adamwStep(eager.p, grad, { step: k, m: eager.m, v: eager.v }, cfg));
      T.dispose([eager, out.gradNorm]);
      eager = { p: out.params, m: out.state.m, v: out.state.v };
      want.push([...(await eager.p.data())]);
    }
    T.dispose(eager);
    const first = step.run({ ...start(), schedule: sched(0) });
    expect([...(await first.p.data())]).toEqual(want[0]);
    // A run with other inputs while the lent ones are alive would overwrite them: refused, nothing consumed.
    const other = start();
    expect(() => step.run({ ...other, schedule: sched(1) })).toThrow(T.RecordingError);
    expect(other.p.isDisposed).toBe(false);
    expect([...(await first.p.data())]).toEqual(want[0]);
    // A lent output shared by a view cannot be taken back.
    const view = T.reshape(first.p, [2, 3]);
    expect(() => step.run({ ...first, schedule: sched(1) })).toThrow(/lent by the last run and is shared/);
    view.dispose();
    // Given back in place: taken back (consumed), and the run goes on from its values.
    const second = step.run({ ...first, schedule: sched(1) });
    expect(first.p.isDonated).toBe(true);
    expect([...(await second.p.data())]).toEqual(want[1]);
    // Disposed instead of given back: the slot is free for a copy of other inputs.
    T.dispose(second);
    const third = step.run({ ...other, schedule: sched(0) });
    expect([...(await third.p.data())]).toEqual(want[0]);
    T.dispose([third, other, grad]);
    step.dispose();
  });

  it('an upload the step later writes in place is put back before each replay reads it', async () => {
    const n = 37;
    const constant = Float32Array.from({ length: n }, (_, i) => 1 + (i % 5));
    const hyper = { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, step: 1, weightDecays: [0] };
    // p is uploaded inside the step, and AdamW (donated) writes its update over p's own buffer.
    const f = (x: T.Tensor) => {
      const p = T.tensor(constant, [n], { backend: gpu });
      const [m, v] = [T.zeros([n], { backend: gpu }), T.zeros([n], { backend: gpu })];
      return T.adamwUpdateMany([p], [x], [m], [v], null, hyper, { donate: true })[0]!.param;
    };
    const step = T.recordStep(gpu, f, T.zeros([n], { backend: gpu }));
    for (const seed of [1, 2, 2]) {
      const x = T.tensor(
        Float32Array.from({ length: n }, (_, i) => ((i * seed) % 7) - 3),
        [n],
        { backend: gpu },
      );
      const [want, got] = [T.tidy(() => f(x)), step.run(x)];
      // Without the put-back, a second run would start from the first run's update instead of the constant.
      expect(await bits(got), `seed ${seed}`).toEqual(await bits(want));
      T.dispose([x, want, got]);
    }
    step.dispose();
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
