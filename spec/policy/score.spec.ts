import { describe, expect, it } from 'vitest';
import { tidy } from '../../src/core/scope.js';
import { tensor } from '../../src/ops/creation.js';
import { logSoftmax } from '../../src/ops/softmax.js';
import { mul } from '../../src/ops/elementwise.js';
import { forward } from '../../src/nn/transformer.js';
import { encodeCompletion, encodePrompt, packSequences, selectRowValues, selectRows } from '../../src/rl/batch.js';
import { batchTensors, scoreLogProbs } from '../../src/rl/score.js';
import { valueAndGrad } from '../../src/core/transforms.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { sftBatch, sftLoss } from '../../src/rl/sft.js';
import { peakedParams, tinyConfig, tokenizer } from './helpers/fixtures.js';

const examples = [
  { prompt: '12+34=', completion: '\\boxed{46}' },
  { prompt: '3,5,7:22=', completion: '\\boxed{3*5+7}' },
  { prompt: '9*9=', completion: '\\boxed{81' },
];
const config = tinyConfig();
const params = peakedParams(config, 2, 'f64');

/** log p(completion token j | prefix) by a plain forward over the unpadded sequence (an independent reference). */
function reference(prompt: string, completion: string, temperature: number): number[] {
  const p = encodePrompt(tokenizer, prompt);
  const seq = [...p, ...encodeCompletion(tokenizer, completion)];
  const lp = tidy(() => {
    const logits = forward(params, config, tensor(new Int32Array(seq), [1, seq.length], { dtype: 'i32' }));
    return logSoftmax(mul(logits, 1 / temperature), -1);
  }).dataSync();
  const v = config.vocabSize;
  return seq.slice(p.length).map((id, j) => lp[(p.length + j - 1) * v + id]!);
}

describe('scoreLogProbs and the SFT loss', () => {
  it.each([1, 0.7])(
    'give log p(token | prefix) of each completion token at temperature %f, 0 where masked',
    (temperature) => {
      const batch = sftBatch(tokenizer, examples);
      const got = tidy(() => scoreLogProbs(params, config, batch, { temperature })).dataSync();
      const c = batch.completionLen;
      examples.forEach((e, r) => {
        const want = reference(e.prompt, e.completion, temperature);
        for (let j = 0; j < c; j++) {
          if (j < want.length) expect(got[r * c + j]).toBeCloseTo(want[j]!, 10);
          else expect(got[r * c + j]).toBe(0);
        }
      });
    },
  );

  it('SFT loss is the mean negative log-likelihood over completion tokens (EOS included)', () => {
    const all = examples.flatMap((e) => reference(e.prompt, e.completion, 1));
    const want = -all.reduce((a, b) => a + b, 0) / all.length;
    expect(tidy(() => sftLoss(params, config, sftBatch(tokenizer, examples))).itemSync()).toBeCloseTo(want, 10);
  });

  it('a batch given as tensors (batchTensors) scores and trains exactly as the host batch does', () => {
    const batch = sftBatch(tokenizer, examples);
    const backend = params.embed.weight.backend;
    const [lossHost, gradsHost] = tidy(() => valueAndGrad((p: typeof params) => sftLoss(p, config, batch))(params));
    const [lossTensors, gradsTensors] = tidy(() => {
      const bt = batchTensors(batch, backend, 'f64');
      return valueAndGrad((p: typeof params) => sftLoss(p, config, bt))(params);
    });
    // The same ops on the same values: the count of targets is an exact integer on the host and on the device.
    expect(lossTensors.itemSync()).toBe(lossHost.itemSync());
    const [a, b] = [treeLeaves(gradsHost), treeLeaves(gradsTensors)];
    a.forEach((g, i) => expect(Array.from(b[i]!.dataSync()), `gradient ${i}`).toEqual(Array.from(g.dataSync())));
    const scores = tidy(() => scoreLogProbs(params, config, batchTensors(batch, backend, 'f64'))).dataSync();
    expect(Array.from(scores)).toEqual(Array.from(tidy(() => scoreLogProbs(params, config, batch)).dataSync()));
  });

  it('scores a minibatch of rows exactly as the full batch scores them', () => {
    const batch = sftBatch(tokenizer, examples);
    const full = tidy(() => scoreLogProbs(params, config, batch)).dataSync() as Float64Array;
    const rows = [2, 0];
    const part = tidy(() => scoreLogProbs(params, config, selectRows(batch, rows))).dataSync();
    const fullAsF32 = Float32Array.from(full);
    expect(Array.from(part)).toEqual(
      Array.from(full.subarray(2 * batch.completionLen, 3 * batch.completionLen)).concat(
        Array.from(full.subarray(0, batch.completionLen)),
      ),
    );
    expect(Array.from(selectRowValues(fullAsF32, batch.completionLen, rows))).toEqual(
      Array.from(Float32Array.from(part)),
    );
  });

  it('packs left-padded prompts and right-padded completions', () => {
    const b = packSequences(
      [
        [1, 5],
        [1, 6, 7],
      ],
      [
        [8, 2],
        [9, 9, 9, 2],
      ],
      0,
    );
    expect([b.promptLen, b.completionLen]).toEqual([3, 4]);
    expect(Array.from(b.tokens)).toEqual([0, 1, 5, 8, 2, 0, 0, 1, 6, 7, 9, 9, 9, 2]);
    expect(Array.from(b.attentionMask)).toEqual([0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1]);
    expect(Array.from(b.completionMask)).toEqual([1, 1, 0, 0, 1, 1, 1, 1]);
    expect(() => packSequences([[]], [[2]], 0)).toThrow(/empty prompt/);
  });
});
