import { it } from 'vitest';
import * as T from '../../src/index.js';
import { forward, initParams, PAD_BIAS, smallConfig, type TransformerParams } from '../../src/nn/index.js';
import { cpu, describeGpu, expectClose } from './helpers.js';

/**
 * LoRA on the WebGPU backend against the reference backend: the adapted model's loss and the gradients of its
 * adapters (base frozen: no gradient for it), with the base held in f32 and in bf16 (widened in the shaders),
 * under gradient checkpointing too. Tolerances as the policy spec's: f32 matmuls, softmaxes and norms compounded
 * through the backward.
 */
const TOL = { atol: 2e-5, rtol: 2e-4 };
const config = smallConfig(24, { dModel: 32, nLayers: 2, nHeads: 4, nKvHeads: 2, dFf: 48, maxSeqLen: 16 });
const lora: T.LoraConfig = { r: 4, alpha: 8, dropout: 0, targetModules: [...T.LORA_MODULES], useRslora: false };

function policyOn(backend: T.Backend, frozen: 'f32' | 'bf16'): TransformerParams {
  const host = initParams(config, new T.Rng(5), { backend: cpu, std: 0.2 });
  const adapters = T.initLora(config, lora, new T.Rng(6), { backend: cpu });
  // B drawn too (it starts at zero), so the adapter path carries a value and a gradient.
  const withB = {
    ...adapters,
    layers: adapters.layers.map((l) =>
      Object.fromEntries(
        Object.entries(l).map(([m, p]) => [
          m,
          { a: p!.a, b: T.randn(p!.b.shape, new T.Rng(7), { backend: cpu, std: 0.1 }) },
        ]),
      ),
    ),
  };
  const move = (t: T.Tensor): T.Tensor =>
    T.tensor(t.dataSync(), [...t.shape], { dtype: t.rank === 2 ? frozen : t.dtype, backend });
  const base = T.treeMap(host, move);
  const adapted = T.treeMap(withB, (t) => T.tensor(t.dataSync(), [...t.shape], { backend }));
  T.dispose([host, adapters, withB]);
  return T.withLora(base, adapted);
}

const tokens = [3, 7, 1, 22, 9, 4, 0, 5, 5, 18, 2, 11, 0, 0];
const targets = [7, 1, 22, 9, 4, 0, 2, 5, 18, 2, 11, 0, 0, 0];
const bias = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, PAD_BIAS, PAD_BIAS];

describeGpu('webgpu: LoRA agrees with the reference backend', (gpu) => {
  it.each([
    ['f32', false],
    ['bf16', false],
    ['bf16', true],
  ] as const)('loss and adapter gradients, base in %s, checkpointed %s', async (frozen, remat) => {
    const run = async (backend: T.Backend): Promise<T.TypedArray[]> => {
      const params = policyOn(backend, frozen);
      const tok = T.tensor(tokens, [2, 7], { dtype: 'i32', backend });
      const tgt = T.tensor(targets, [2, 7], { dtype: 'i32', backend });
      const keyBias = T.tensor(bias, [2, 7], { backend });
      const [value, grads] = T.valueAndGrad((t: unknown) =>
        T.crossEntropy(forward(T.withTrainable(params, t as never), config, tok, { keyBias, remat }), tgt),
      )(T.trainableOf(params));
      const out = await Promise.all([value, ...T.treeLeaves(grads)].map((t) => t.data()));
      T.dispose([value, grads, params, tok, tgt, keyBias]);
      return out;
    };
    const want = await run(cpu);
    const got = await run(gpu);
    // The loss and 2 layers x 7 modules x (A, B) adapter gradients.
    if (want.length !== 1 + 2 * 7 * 2) throw new Error(`${want.length} tensors`);
    want.forEach((w, i) => expectClose(`lora ${i === 0 ? 'loss' : `adapter grad ${i - 1}`}`, got[i]!, w, TOL));
  });
});
