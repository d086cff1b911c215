import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from './helpers.js';

/**
 * 200 training steps of a small MLP on the WebGPU backend (valueAndGrad + one fused AdamW kernel per parameter,
 * the loss read back every step): after warm-up, live GPU buffers and bytes (what tensors hold, not the pool's
 * idle buffers), live tensors, and the pool's idle buffers and total allocations stay flat.
 */
interface Params extends Record<string, T.Tensor> {
  w1: T.Tensor;
  b1: T.Tensor;
  w2: T.Tensor;
  b2: T.Tensor;
}

describeGpu('webgpu memory', (gpu) => {
  it('200 training steps leave live GPU buffers, bytes and tensors flat after warm-up', async () => {
    const rng = new T.Rng(3);
    const on = { backend: gpu };
    const init = (s: number[], std: number): T.Tensor => {
      const host = T.randn(s, rng, { std });
      const t = T.tensor(host.dataSync(), s, on);
      host.dispose();
      return t;
    };
    let params: Params = {
      w1: init([16, 32], 0.3),
      b1: T.zeros([32], on),
      w2: init([32, 5], 0.3),
      b2: T.zeros([5], on),
    };
    let m = Object.fromEntries(Object.entries(params).map(([k, p]) => [k, T.zerosLike(p)])) as Params;
    let v = Object.fromEntries(Object.entries(params).map(([k, p]) => [k, T.zerosLike(p)])) as Params;
    const x = init([24, 16], 1);
    const y = T.tensor(
      Array.from({ length: 24 }, (_, i) => i % 5),
      [24],
      { dtype: 'i32', backend: gpu },
    );
    const loss = (p: Params): T.Tensor =>
      T.crossEntropy(T.add(T.matmul(T.gelu(T.add(T.matmul(x, p.w1), p.b1)), p.w2), p.b2), y);
    const step = T.valueAndGrad(loss);

    const snapshots: { step: number; live: T.MemoryInfo; tensors: number; idle: number; created: number }[] = [];
    const losses: number[] = [];
    for (let s = 1; s <= 200; s++) {
      const [value, grads] = step(params);
      const next = {
        p: {} as Record<string, T.Tensor>,
        m: {} as Record<string, T.Tensor>,
        v: {} as Record<string, T.Tensor>,
      };
      for (const k of Object.keys(params)) {
        const r = T.adamwUpdate(params[k]!, grads[k]!, m[k]!, v[k]!, {
          lr: 0.01,
          beta1: 0.9,
          beta2: 0.999,
          eps: 1e-8,
          weightDecay: 0.01,
          step: s,
        });
        next.p[k] = r.param;
        next.m[k] = r.m;
        next.v[k] = r.v;
      }
      T.dispose([grads, params, m, v]);
      params = next.p as Params;
      m = next.m as Params;
      v = next.v as Params;
      losses.push(await value.item());
      value.dispose();
      if (s % 20 === 0) {
        const st = gpu.stats();
        snapshots.push({
          step: s,
          live: gpu.memory(),
          tensors: T.liveTensors(),
          idle: st.idleBuffers,
          created: st.created,
        });
      }
    }
    const warm = snapshots[1]!; // after 40 steps
    for (const snap of snapshots.slice(2)) {
      expect(snap.live, `live buffers/bytes at step ${snap.step}`).toEqual(warm.live);
      expect(snap.tensors, `live tensors at step ${snap.step}`).toBe(warm.tensors);
      expect(snap.idle, `idle pool buffers at step ${snap.step}`).toBe(warm.idle);
      expect(snap.created, `buffers ever created at step ${snap.step}`).toBe(warm.created);
    }
    expect(losses[199]!).toBeLessThan(losses[0]! * 0.5); // it trains
    console.log(
      `leak test: live ${warm.live.buffers} buffers / ${warm.live.bytes} bytes, ${warm.tensors} tensors, ${warm.idle} idle pool buffers, ${warm.created} created; loss ${losses[0]!.toFixed(3)} -> ${losses[199]!.toFixed(3)}`,
    );
    T.dispose([params, m, v, x, y]);
  });
});
