import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';

/**
 * AdamW with donated parameters and moments (`adamwStep(..., { donate: true })`, as JAX's donated buffers): the
 * same bits as the functional step on the reference and cpu backends (the WebGPU twin is in
 * spec/webgpu/donation.spec.ts), the step writing into the given storage, the given handles consumed (a later use
 * is a `DonatedTensorError` naming the step's op), a tensor donated twice refused, a shared one copied, and on the
 * cpu backend a step's peak bytes lower by exactly the weights and both moments.
 */
type Params = Record<string, T.Tensor>;

const SHAPES: Record<string, number[]> = { w: [37, 21], b: [21], e: [5, 3, 11], s: [1] };
const CFG: T.AdamWConfig = { lr: 3e-2, beta1: 0.9, beta2: 0.95, weightDecay: 0.1, maxGradNorm: 0.7 };

const draw = (backend: T.Backend, rng: T.Rng, dtype: 'f32' | 'f64'): Params =>
  Object.fromEntries(Object.entries(SHAPES).map(([k, s]) => [k, T.randn(s, rng, { backend, dtype })]));

/** Every byte of a tensor's values. */
const bytes = (t: T.Tensor): number[] => {
  const a = t.dataSync();
  return Array.from(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
};
const treeBytes = (tree: unknown): number[][] => T.treeLeaves(tree).map(bytes);

const backends: [string, () => T.Backend, 'f32' | 'f64'][] = [
  ['reference', () => new T.ReferenceBackend(), 'f32'],
  ['reference (f64)', () => new T.ReferenceBackend(), 'f64'],
  // Every kernel call split among the threads, however small.
  ['cpu', () => new T.CpuBackend({ threads: 2, minParallelWork: 0 }), 'f32'],
  // f64 is the reference kernel on the cpu backend's memory.
  ['cpu (f64)', () => new T.CpuBackend({ threads: 2, minParallelWork: 0 }), 'f64'],
];

describe.each(backends)('AdamW with donation on %s', (_, open, dtype) => {
  it('gives the same bits as the functional step, in the given storage, over 4 steps with and without clipping', () => {
    const backend = open();
    for (const cfg of [CFG, { ...CFG, maxGradNorm: undefined }]) {
      const rng = new T.Rng(11);
      const start = draw(backend, rng, dtype);
      const grads = [0, 1, 2, 3].map(() => draw(backend, rng, dtype));
      let functional = { params: start, state: T.adamwInit(start) };
      // The donated run starts from its own copies: the functional run keeps reading `start`.
      const copies = T.tidy(() => T.treeMap(start, (p) => T.add(p, 0)));
      let donated = { params: copies, state: T.adamwInit(copies) };
      for (const g of grads) {
        const f = T.tidy(() => T.adamwStep(functional.params, g, functional.state, cfg));
        const given = [...T.treeLeaves(donated.params), ...T.treeLeaves([donated.state.m, donated.state.v])];
        const storages = given.map((t) => t.storageFor('spec'));
        const d = T.tidy(() => T.adamwStep(donated.params, g, donated.state, cfg, { donate: true }));
        expect(treeBytes(d.params)).toEqual(treeBytes(f.params));
        expect(treeBytes([d.state.m, d.state.v])).toEqual(treeBytes([f.state.m, f.state.v]));
        expect(d.gradNorm.itemSync()).toBe(f.gradNorm.itemSync());
        const outputs = [...T.treeLeaves(d.params), ...T.treeLeaves([d.state.m, d.state.v])];
        expect(
          outputs.map((t) => t.storageFor('spec')),
          'each output is its input storage',
        ).toEqual(storages);
        expect(given.every((t) => t.isDisposed)).toBe(true);
        // The functional step left its inputs as they were: the caller disposes them.
        expect(T.treeLeaves(functional.params).every((t) => !t.isDisposed)).toBe(true);
        T.dispose(functional.params === start ? functional.state : [functional.params, functional.state]);
        functional = { params: f.params, state: f.state };
        donated = { params: d.params, state: d.state };
        T.dispose([f.gradNorm, d.gradNorm]);
      }
      T.dispose([start, grads, functional.params, functional.state, donated.params, donated.state]);
    }
    expect(backend.memory().buffers).toBe(0);
  });

  it('consumes what it is given: a later use is a DonatedTensorError naming the step', () => {
    const backend = open();
    const rng = new T.Rng(3);
    const params = draw(backend, rng, dtype);
    const grads = draw(backend, rng, dtype);
    const state = T.adamwInit(params);
    const out = T.tidy(() => T.adamwStep(params, grads, state, CFG, { donate: true }));
    for (const old of [params.w!, state.m.b!, state.v.e!]) {
      expect(() => T.neg(old)).toThrow(T.DonatedTensorError);
      expect(() => old.dataSync()).toThrow(
        new RegExp(`dataSync: tensor #${old.id} was donated to adamwUpdateMany and can no longer be used`),
      );
      const caught = (() => {
        try {
          T.tidy(() => T.adamwStep(params, grads, state, CFG));
        } catch (e) {
          return e;
        }
        return null;
      })();
      expect(caught).toBeInstanceOf(T.DonatedTensorError);
      expect((caught as T.DonatedTensorError).consumer).toBe('adamwUpdateMany');
      old.dispose(); // a no-op, as for any disposed handle
    }
    // The gradients were only read.
    expect(T.treeLeaves(grads).every((g) => !g.isDisposed)).toBe(true);
    T.dispose([grads, out]);
    expect(backend.memory().buffers).toBe(0);
  });

  it('refuses a tensor donated twice before touching anything', () => {
    const backend = open();
    const rng = new T.Rng(5);
    const x = T.randn([4, 3], rng, { backend, dtype });
    const g = T.randn([4, 3], rng, { backend, dtype });
    const tied = { a: x, b: x };
    const state = T.adamwInit(tied);
    expect(() => T.adamwStep(tied, { a: g, b: g }, state, CFG, { donate: true })).toThrow(T.ArgumentError);
    expect(() => T.adamwStep(tied, { a: g, b: g }, state, CFG, { donate: true })).toThrow(/donated twice/);
    expect(x.isDisposed || T.treeLeaves(state).some((t) => t.isDisposed)).toBe(false);
    // The same tree as parameters and as a moment is refused too.
    const own = { a: x };
    expect(() => T.adamwStep(own, { a: g }, { step: 0, m: own, v: own }, CFG, { donate: true })).toThrow(
      /donated twice/,
    );
    T.dispose([x, g, state]);
  });

  it('copies a parameter a view shares: the view keeps the old values, the handle is consumed', () => {
    const backend = open();
    const rng = new T.Rng(8);
    const params = draw(backend, rng, dtype);
    const grads = draw(backend, rng, dtype);
    const state = T.adamwInit(params);
    const want = T.tidy(() => T.adamwStep(params, grads, state, CFG));
    const view = T.reshape(params.w!, [21, 37]);
    const before = bytes(view);
    const [w, m] = [params.w!.storageFor('spec'), state.m.w!.storageFor('spec')];
    const out = T.tidy(() => T.adamwStep(params, grads, state, CFG, { donate: true }));
    expect(treeBytes(out.params)).toEqual(treeBytes(want.params));
    expect(bytes(view), 'the view still holds the old weights').toEqual(before);
    expect(out.params.w!.storageFor('spec')).not.toBe(w);
    expect(out.state.m.w!.storageFor('spec'), 'its moment, not shared, is updated in place').toBe(m);
    expect(() => T.neg(params.w!)).toThrow(T.DonatedTensorError);
    T.dispose([view, grads, want, out]);
    expect(backend.memory().buffers).toBe(0);
  });
});

describe('AdamW with donation on the cpu backend: peak bytes', () => {
  it("a step's peak falls by exactly the weights and both moments", () => {
    const backend = new T.CpuBackend({ threads: 2, minParallelWork: 0 });
    const rng = new T.Rng(21);
    const weights = Object.values(SHAPES).reduce((a, s) => a + s.reduce((p, n) => p * n, 1), 0) * 4;
    const rise = (donate: boolean): number => {
      const params = draw(backend, rng, 'f32');
      const grads = draw(backend, rng, 'f32');
      const state = T.adamwInit(params);
      backend.resetPeakMemory();
      const before = backend.memory().bytes;
      const out = T.tidy(() => T.adamwStep(params, grads, state, CFG, { donate }));
      const peak = backend.peakMemoryBytes() - before;
      T.dispose([params, grads, state, out]);
      return peak;
    };
    const functional = rise(false);
    const donated = rise(true);
    expect(functional - donated).toBe(3 * weights);
    // What is left of the donated step: the sum of squares and the norm, two f32 scalars.
    expect(donated).toBe(8);
    expect(backend.memory().buffers).toBe(0);
    backend.dispose();
  });
});
