import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { toHfNames } from '../../src/io/hf.js';
import { describeGpu } from '../webgpu/helpers.js';
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
 * The same conformance against transformers 5.17 as conformance.spec.ts, with the checkpoints streamed onto the
 * WebGPU backend: logits and token log-probs within 1e-4, gradients within 1e-4 of the largest entry, greedy ids
 * exactly equal. Without an adapter the file skips, except under CI where it fails (see spec/webgpu/helpers.ts).
 */
for (const name of ['qwen2-tiny', 'qwen3-tiny']) {
  describeGpu(`${name} on the WebGPU backend matches transformers`, (gpu) => {
    const ref = readReference(name);

    it('logits, token log-probs and gradients', async () => {
      const model = await loadModel(`${FIXTURES}/${name}`, gpu);
      expect(model.params.embed.weight.backend).toBe(gpu);
      const { tokens, positions, keyBias } = inputsOf(ref, gpu);
      const logits = T.forward(model.params, model.config, tokens, { positions, keyBias });
      const v = model.config.vocabSize;
      const idx = realPositions(ref).flatMap((p) => Array.from({ length: v }, (_, k) => p * v + k));
      expectWithin('logits', await logits.data(), ref.logits, 1e-4, idx);
      const lp = T.tidy(() => tokenLogprobs(model, model.params, ref, gpu));
      expectWithin('token log-probs', await lp.data(), ref.tokenLogprobs, 1e-4);
      const [, grads] = T.valueAndGrad((p: T.TransformerParams) => T.sum(tokenLogprobs(model, p, ref, gpu)))(
        model.params,
      );
      const named = toHfNames(grads);
      for (const [hfName, want] of ref.grads) {
        const scale = Math.max(...Array.from(want, Math.abs));
        expectWithin(`grad ${hfName}`, await named.get(hfName)!.data(), want, 1e-4 * scale);
      }
      T.dispose([model.params, tokens, positions, keyBias, logits, lp, grads]);
    });

    it('greedy continuations equal transformers ids exactly', async () => {
      const model = await loadModel(`${FIXTURES}/${name}`, gpu);
      const width = ref.greedy.length / 2;
      const prompts = [0, 1].map((r) => Array.from(ref.inputIds.subarray(r * ref.t, r * ref.t + 10)));
      const rows = await greedy(model, model.params, prompts, width - 10, gpu);
      expect(rows).toEqual([0, 1].map((r) => Array.from(ref.greedy.subarray(r * width, (r + 1) * width))));
      T.dispose(model.params);
    });
  });
}
