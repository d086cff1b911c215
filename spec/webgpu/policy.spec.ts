import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { tinyRun } from '../training/helpers/tiny-run.js';
import {
  forward,
  forwardWithCache,
  initParams,
  PAD_BIAS,
  smallConfig,
  disposeCache,
  createKvCache,
  type KvCache,
  type TransformerParams,
} from '../../src/nn/index.js';
import { cpu, describeGpu, expectClose } from './helpers.js';

/**
 * The transformer policy (grouped-query attention, RoPE, RMSNorm, SwiGLU, tied LM head) on the WebGPU backend
 * against the CPU backend: the whole valueAndGrad of a padded cross-entropy, the KV-cache forward, and a tiny
 * run of the RLVR trainer (warm-start, sampling, RL steps, evaluation) whose metrics agree step by step.
 * Tolerance atol 2e-5, rtol 2e-4: two layers of f32 matmuls, softmaxes and norms, each within a few ULP of the
 * CPU, compounded through the backward pass.
 */
const TOL = { atol: 2e-5, rtol: 2e-4 };

const config = smallConfig(24, { dModel: 32, nLayers: 2, nHeads: 4, nKvHeads: 2, dFf: 48, maxSeqLen: 16 });

function paramsOn(backend: T.Backend): TransformerParams {
  const host = initParams(config, new T.Rng(5), { backend: cpu, std: 0.2 });
  const moved = T.treeMap(host, (t) => T.tensor(t.dataSync(), [...t.shape], { dtype: t.dtype, backend }));
  if (backend !== cpu) T.dispose(host);
  return moved;
}

const tokens = [3, 7, 1, 22, 9, 4, 0, 5, 5, 18, 2, 11, 0, 0];
const targets = [7, 1, 22, 9, 4, 0, 2, 5, 18, 2, 11, 0, 0, 0];
const bias = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, PAD_BIAS, PAD_BIAS];

describeGpu('webgpu: the transformer policy agrees with the CPU backend', (gpu) => {
  it('valueAndGrad of a padded next-token cross-entropy (every parameter)', async () => {
    const run = async (backend: T.Backend): Promise<T.TypedArray[]> => {
      const params = paramsOn(backend);
      const tok = T.tensor(tokens, [2, 7], { dtype: 'i32', backend });
      const tgt = T.tensor(targets, [2, 7], { dtype: 'i32', backend });
      const keyBias = T.tensor(bias, [2, 7], { backend });
      const [value, grads] = T.valueAndGrad((p: TransformerParams) =>
        T.crossEntropy(forward(p, config, tok, { keyBias }), tgt),
      )(params);
      const out = await Promise.all([value, ...T.treeLeaves(grads)].map((t) => t.data()));
      T.dispose([value, grads, params, tok, tgt, keyBias]);
      return out;
    };
    const want = await run(cpu);
    const got = await run(gpu);
    want.forEach((w, i) => expectClose(`policy ${i === 0 ? 'loss' : `grad leaf ${i - 1}`}`, got[i]!, w, TOL));
  });

  it.each([
    ['growing', false],
    ['preallocated', true],
  ])('the KV-cache forward (prompt, then two single tokens), %s cache', async (_, preallocated) => {
    const run = async (backend: T.Backend): Promise<T.TypedArray[]> => {
      const params = paramsOn(backend);
      const outs: T.TypedArray[] = [];
      // Capacity 12 > the 10 positions used: the last rows are never keys.
      let cache: KvCache | null = preallocated ? createKvCache(params, config, 2, 12) : null;
      for (const chunk of [
        [3, 7, 1, 5, 9, 2],
        [4, 8],
        [6, 6],
      ]) {
        const tok = T.tensor(chunk, [2, chunk.length / 2], { dtype: 'i32', backend });
        const r = forwardWithCache(params, config, tok, cache);
        outs.push(await r.logits.data());
        T.dispose([tok, r.logits]);
        cache = r.cache;
      }
      disposeCache(cache);
      T.dispose(params);
      return outs;
    };
    const want = await run(cpu);
    const got = await run(gpu);
    want.forEach((w, i) => expectClose(`logits step ${i}`, got[i]!, w, TOL));
  });

  it("the warm-start's recorded steps give the op-by-op run's records bit for bit, and are let go at its end", async () => {
    // Six warm-start steps (a shape is recorded at its second).
    const cfg = tinyRun({ steps: 0, warmStartSteps: 6 });
    const opByOp = await T.createWebGpuBackend({ recordSteps: false });
    expect(opByOp.record).toBeUndefined();
    const held: number[] = [];
    const recorded = await T.train(
      { ...cfg, backend: 'webgpu' },
      {
        backend: gpu,
        onProgress: (p) => {
          if (p.phase === 'warmstart') held.push(gpu.stats().heldBuffers);
        },
      },
    );
    const plain = await T.train({ ...cfg, backend: 'webgpu' }, { backend: opByOp });
    // A shape's first step runs op by op (its kernels tuned at its end), the next ones recorded (buffers held);
    // nothing is held after the warm-start.
    expect(held.length).toBe(6);
    expect(held[0], 'held buffers after the first warm-start step').toBe(0);
    expect(
      held.slice(1).every((n) => n > 0),
      `held buffers at each warm-start step: ${held.join(', ')}`,
    ).toBe(true);
    expect(gpu.stats().heldBuffers).toBe(0);
    expect(recorded.records.length).toBe(plain.records.length);
    plain.records.forEach((want, i) => {
      const got = recorded.records[i]! as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(want as unknown as Record<string, unknown>)) {
        if (/per_s|_ms|seconds|time/.test(k)) continue; // throughput, not results
        expect(got[k], `record ${i} ${k}`).toEqual(v);
      }
    });
    const [a, b] = [T.treeLeaves(recorded.params), T.treeLeaves(plain.params)];
    for (let i = 0; i < a.length; i++)
      expect([...(await a[i]!.data())], `parameter ${i}`).toEqual([...(await b[i]!.data())]);
    T.dispose([recorded.params, plain.params]);
    opByOp.dispose();
  });

  it('a tiny trainer run (warm-start, RL steps, evaluation) gives the same metrics on both backends', async () => {
    const cfg = tinyRun({ steps: 2 });
    const onCpu = await T.train({ ...cfg, backend: 'reference' }, { backend: cpu });
    const onGpu = await T.train({ ...cfg, backend: 'webgpu' }, { backend: gpu });
    expect(onGpu.records.length).toBe(onCpu.records.length);
    onCpu.records.forEach((want, i) => {
      const got = onGpu.records[i]! as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(want as unknown as Record<string, unknown>)) {
        if (/per_s|_ms|seconds|time/.test(k)) continue; // throughput, not results
        if (typeof v === 'number') expectClose(`record ${i} ${k}`, [got[k] as number], [v], { atol: 1e-4, rtol: 1e-4 });
        else expect(got[k], `record ${i} ${k}`).toEqual(v);
      }
    });
    T.dispose([onCpu.params, onGpu.params]);
  });
});
