import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import * as E from 'fp-ts/lib/Either.js';
import { Rng, treeLeaves } from '../../src/index.js';
import { fromHfConfig, toHfConfig } from '../../src/io/hf.js';
import { initParams, smallConfig, type TransformerConfig } from '../../src/nn/transformer.js';
import type { CheckpointError } from '../../src/io/safetensors.js';

/** config.json of the three architectures: what maps onto the transformer, and what is refused, by field. */
const fixture = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(`spec/fixtures/hf/${name}/config.json`, 'utf8'));
const ok = (e: E.Either<CheckpointError, TransformerConfig>): TransformerConfig => {
  if (E.isLeft(e)) throw e.left;
  return e.right;
};
const err = (e: E.Either<CheckpointError, TransformerConfig>): CheckpointError => {
  if (E.isRight(e)) throw new Error(`expected an error, got ${JSON.stringify(e.right)}`);
  return e.left;
};

describe('Hugging Face config.json', () => {
  it('reads the Qwen2 and Qwen3 fixtures (rope_parameters, GQA, head_dim, tied head)', () => {
    const q2 = ok(fromHfConfig(fixture('qwen2-tiny')));
    expect(q2).toMatchObject({
      vocabSize: 512,
      dModel: 64,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dFf: 160,
      ropeTheta: 1e6,
      rmsEps: 1e-6,
      qkvBias: true,
    });
    expect(q2.qkNorm).toBeUndefined();
    expect(q2.tieEmbeddings).toBeUndefined();
    const q3 = ok(fromHfConfig(fixture('qwen3-tiny')));
    expect(q3).toMatchObject({ ropeTheta: 1e6, qkNorm: true });
    expect(q3.qkvBias).toBeUndefined();
    // head_dim 16 = 64 / 4 is the default, so it is not kept; another value is.
    expect(q3.headDim).toBeUndefined();
    expect(ok(fromHfConfig({ ...fixture('qwen3-tiny'), head_dim: 32 })).headDim).toBe(32);
  });

  it('takes rope_theta from the top level (older transformers) when rope_parameters is absent', () => {
    const { rope_parameters: _, ...legacy } = fixture('qwen2-tiny');
    expect(ok(fromHfConfig({ ...legacy, rope_theta: 5e5 })).ropeTheta).toBe(5e5);
    expect(ok(fromHfConfig(legacy)).ropeTheta).toBe(10_000);
  });

  it('an absent tie_word_embeddings is an untied head (transformers default); a Llama config', () => {
    const { tie_word_embeddings: _, ...untied } = fixture('qwen3-tiny');
    expect(ok(fromHfConfig(untied)).tieEmbeddings).toBe(false);
    const llama = ok(
      fromHfConfig({ ...fixture('qwen2-tiny'), architectures: ['LlamaForCausalLM'], model_type: 'llama' }),
    );
    expect(llama.qkvBias).toBeUndefined();
    expect(llama.qkNorm).toBeUndefined();
  });

  it('round-trips every architecture through toHfConfig', () => {
    for (const extra of [{}, { qkvBias: true }, { qkNorm: true, headDim: 8 }, { tieEmbeddings: false }] as const) {
      const c = smallConfig(40, { ...extra });
      expect(ok(fromHfConfig(JSON.parse(JSON.stringify(toHfConfig(c)))))).toEqual(c);
    }
    expect(toHfConfig(smallConfig(40, { qkNorm: true })).architectures).toEqual(['Qwen3ForCausalLM']);
    expect(toHfConfig(smallConfig(40, { qkvBias: true })).architectures).toEqual(['Qwen2ForCausalLM']);
  });

  it('refuses what the model would only approximate, naming the field and the file', () => {
    const base = fixture('qwen3-tiny');
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, architectures: ['MistralForCausalLM'] }, 'architectures'],
      [{ ...base, rope_scaling: { rope_type: 'yarn', factor: 4 } }, 'rope_scaling'],
      [{ ...base, rope_parameters: { rope_theta: 1e6, rope_type: 'llama3' } }, 'rope_parameters.rope_type'],
      [{ ...base, use_sliding_window: true, sliding_window: 4096 }, 'use_sliding_window'],
      [{ ...base, layer_types: ['full_attention', 'sliding_attention'] }, 'layer_types'],
      [{ ...base, attention_bias: true }, 'attention_bias'],
      [{ ...base, hidden_act: 'gelu' }, 'hidden_act'],
      [{ ...base, hidden_size: 'big' }, 'hidden_size'],
    ];
    for (const [json, field] of cases) {
      const e = err(fromHfConfig(json, 'dir/config.json'));
      expect([e.kind, e.field, e.file]).toEqual(['bad-config', field, 'dir/config.json']);
      expect(e.message).toContain('dir/config.json');
    }
  });

  it('optional fields off keep the parameter pytree and its init exactly as before', () => {
    const plain = initParams(smallConfig(30), new Rng(3));
    expect(Object.keys(plain).sort()).toEqual(['embed', 'finalNorm', 'layers']);
    expect(Object.keys(plain.layers[0]!).sort()).toEqual([
      'attnNorm',
      'mlpNorm',
      'wDown',
      'wGate',
      'wUp',
      'wk',
      'wo',
      'wq',
      'wv',
    ]);
    const full = initParams(
      smallConfig(30, { qkvBias: true, qkNorm: true, headDim: 8, tieEmbeddings: false }),
      new Rng(3),
    );
    expect(Object.keys(full.layers[0]!).sort()).toEqual([
      'attnNorm',
      'bk',
      'bq',
      'bv',
      'kNorm',
      'mlpNorm',
      'qNorm',
      'wDown',
      'wGate',
      'wUp',
      'wk',
      'wo',
      'wq',
      'wv',
    ]);
    expect(full.layers[0]!.wq.shape).toEqual([4 * 8, 64]);
    expect(full.layers[0]!.wo.shape).toEqual([64, 4 * 8]);
    expect(full.lmHead!.weight.shape).toEqual([30, 64]);
    // The embedding is drawn first in both, so it is the same numbers.
    expect(Array.from(full.embed.weight.dataSync())).toEqual(Array.from(plain.embed.weight.dataSync()));
    expect(treeLeaves(full).length).toBe(treeLeaves(plain).length + 2 * 5 + 1);
  });
});
