import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { toHfNames } from '../../src/io/hf.js';
import {
  expectWithin,
  FIXTURES,
  greedy,
  inputsOf,
  loadModel,
  readReference,
  realPositions,
  tokenLogprobs,
} from './helpers.js';

/**
 * The transformer against transformers 5.17 on the CPU backend, for the tiny Qwen2 (q/k/v biases, GQA) and
 * Qwen3 (q/k norms, explicit head_dim, GQA) fixtures loaded from their bf16 Hub files: logits and token
 * log-probs within 1e-4, gradients of sum(log-probs) within 1e-4 of the largest entry, greedy ids equal.
 * Row 2 of the batch is left-padded (positions from cumsum(mask) - 1).
 */
const cpu = new T.CpuBackend();

describe.each(['qwen2-tiny', 'qwen3-tiny'])('%s on the CPU backend matches transformers', (name) => {
  const ref = readReference(name);

  it('logits at every real position, left padding included, within 1e-4', async () => {
    const model = await loadModel(`${FIXTURES}/${name}`, cpu);
    const { tokens, positions, keyBias } = inputsOf(ref, cpu);
    const logits = T.forward(model.params, model.config, tokens, { positions, keyBias }).dataSync();
    const v = model.config.vocabSize;
    const idx = realPositions(ref).flatMap((p) => Array.from({ length: v }, (_, k) => p * v + k));
    const worst = expectWithin('logits', logits, ref.logits, 1e-4, idx);
    expect(worst).toBeLessThan(1e-4);
    T.dispose([model.params, tokens, positions, keyBias]);
  });

  it('token log-probs within 1e-4 and gradients of their sum within 1e-4 of the largest entry', async () => {
    const model = await loadModel(`${FIXTURES}/${name}`, cpu);
    const lp = T.tidy(() => tokenLogprobs(model, model.params, ref, cpu));
    expectWithin('token log-probs', lp.dataSync(), ref.tokenLogprobs, 1e-4);
    const [, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sum(tokenLogprobs(model, p, ref, cpu)))(
      model.params,
    );
    const named = toHfNames(grads);
    expect(ref.grads.size).toBeGreaterThan(5);
    for (const [hfName, want] of ref.grads) {
      const got = named.get(hfName);
      expect(got, hfName).toBeDefined();
      const scale = Math.max(...Array.from(want, Math.abs));
      expectWithin(`grad ${hfName}`, got!.dataSync(), want, 1e-4 * scale);
    }
    T.dispose([model.params, lp, grads]);
  });

  it('greedy continuations (KV cache) equal transformers ids exactly', async () => {
    const model = await loadModel(`${FIXTURES}/${name}`, cpu);
    const width = ref.greedy.length / 2;
    const prompts = [0, 1].map((r) => Array.from(ref.inputIds.subarray(r * ref.t, r * ref.t + 10)));
    const rows = await greedy(model, model.params, prompts, width - 10, cpu);
    expect(rows).toEqual([0, 1].map((r) => Array.from(ref.greedy.subarray(r * width, (r + 1) * width))));
    T.dispose(model.params);
  });
});
