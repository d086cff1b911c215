import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from './helpers.js';

/**
 * AdamW with donated parameters and moments on WebGPU (spec/policy/donation.spec.ts has the host backends): a
 * tensor updated in place is bound once, read_write, as its output (WebGPU refuses one buffer bound read-only and
 * writable in one dispatch). The donated step gives the functional step's bits and keeps every buffer; with a
 * view sharing one weight, that weight is copied in the same dispatches as the others are updated in place. More
 * leaves than one dispatch binds (2 on llvmpipe), an empty leaf, with and without clipping; the device records no
 * error (the helpers check it after the file).
 */
const LEAVES = 9;
const shapeOf = (i: number): number[] => (i === 4 ? [0] : i % 2 === 0 ? [3 + i, 5] : [7 * i + 1]);

async function bits(ts: readonly T.Tensor[]): Promise<number[][]> {
  const values = await Promise.all(ts.map((t) => t.data()));
  return values.map((a) => Array.from(new Uint32Array(a.buffer, a.byteOffset, a.length)));
}

describeGpu('webgpu AdamW with donation', (gpu) => {
  it.each([
    [0.5, false],
    [undefined, false],
    [0.5, true],
  ])(
    'gives the functional bits in the given buffers (maxGradNorm %s, a view shares a weight: %s)',
    async (maxGradNorm, viewed) => {
      const rng = new T.Rng(17);
      const draw = (): T.Tensor[] =>
        Array.from({ length: LEAVES }, (_, i) => T.randn(shapeOf(i), rng, { backend: gpu }));
      const params = draw();
      const copies = T.tidy(() => params.map((p) => T.add(p, 0)));
      const steps = [draw(), draw(), draw()];
      const cfg = { lr: 0.02, beta1: 0.9, beta2: 0.99, weightDecay: 0.05, maxGradNorm };
      let f = { params, state: T.adamwInit(params) };
      let d = { params: copies, state: T.adamwInit(copies) };
      const view = viewed ? T.reshape(copies[0]!, [5, 3]) : null;
      for (const [s, grads] of steps.entries()) {
        const given = [...d.params, ...d.state.m, ...d.state.v];
        const buffers = given.map((t) => t.storageFor('spec'));
        const fs = T.tidy(() => T.adamwStep(f.params, grads, f.state, cfg));
        const ds = T.tidy(() => T.adamwStep(d.params, grads, d.state, cfg, { donate: true }));
        expect(await bits([...ds.params, ...ds.state.m, ...ds.state.v])).toEqual(
          await bits([...fs.params, ...fs.state.m, ...fs.state.v]),
        );
        const outputs = [...ds.params, ...ds.state.m, ...ds.state.v].map((t) => t.storageFor('spec'));
        outputs.forEach((o, i) => {
          // Only the shared weight, at the first step, goes to a new buffer.
          if (view && s === 0 && i === 0) expect(o).not.toBe(buffers[i]);
          else expect(o, `output ${i} at step ${s}`).toBe(buffers[i]);
        });
        expect(given.every((t) => t.isDisposed)).toBe(true);
        if (s > 0) T.dispose([f.params, f.state]);
        f = { params: fs.params, state: fs.state };
        d = { params: ds.params, state: ds.state };
        T.dispose([fs.gradNorm, ds.gradNorm]);
      }
      if (view) expect(await bits([view])).toEqual(await bits([T.reshape(params[0]!, [5, 3])]));
      T.dispose([params, copies, steps, f, d, view]);
    },
  );
});
