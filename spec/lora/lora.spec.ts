import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { expectTreeGradientsMatch } from '../helpers/gradcheck.js';
import { FIXTURES, inputsOf, loadModel, readReference, realPositions } from '../hf/helpers.js';

/**
 * LoRA on the policy, on the transformers-computed fixtures (tiny Qwen2 and Qwen3): the adapted model with B = 0
 * is the base model exactly; with random B it equals the merged model (1e-5 of the largest logit); only the
 * adapters get gradients, and those match finite differences; a saved adapter has peft's names and config and
 * reloads to identical logits; a merged export loads through the Hub loader to the merged model's logits.
 */
const cpu = new T.CpuBackend({ threads: 2 });
const reference = new T.ReferenceBackend();
const dirs: string[] = [];
const tmp = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'lora-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ALL: T.LoraConfig = { ...T.LORA_DEFAULTS, r: 4, alpha: 8, targetModules: [...T.LORA_MODULES] };

/** The adapters with B drawn too (peft starts B at zero, which would hide every bug of the adapter path). */
function randomB(lora: T.LoraWeights, rng: T.Rng, std = 0.05): T.LoraWeights {
  const layers = lora.layers.map((layer) =>
    Object.fromEntries(
      Object.entries(layer).map(([m, pair]) => [
        m,
        { a: pair!.a, b: T.randn(pair!.b.shape, rng, { std, dtype: pair!.b.dtype, backend: pair!.b.backend }) },
      ]),
    ),
  );
  return { ...lora, layers };
}

const logitsOf = (model: T.HfModel, params: T.TransformerParams, backend: T.Backend, name: string): Float32Array => {
  const ref = readReference(name);
  return T.tidy(() => {
    const { tokens, positions, keyBias } = inputsOf(ref, backend);
    return T.forward(params, model.config, tokens, { positions, keyBias });
  }).dataSync() as Float32Array;
};

describe.each(['qwen2-tiny', 'qwen3-tiny'])('LoRA on %s', (name) => {
  it.each([
    ['cpu', cpu],
    ['reference', reference],
  ] as const)('with B = 0 computes the base model exactly (%s)', async (_, backend) => {
    const model = await loadModel(`${FIXTURES}/${name}`, backend);
    const lora = T.initLora(model.config, ALL, new T.Rng(1), { backend });
    const base = logitsOf(model, model.params, backend, name);
    const adapted = logitsOf(model, T.withLora(model.params, lora), backend, name);
    expect(Buffer.from(adapted.buffer).equals(Buffer.from(base.buffer))).toBe(true);
    // A is drawn as peft draws it: uniform in +-1/sqrt(in), every entry inside, spread over the range.
    const a = lora.layers[0]!.q_proj!.a.dataSync();
    const bound = 1 / Math.sqrt(model.config.dModel);
    expect(Math.max(...Array.from(a, Math.abs))).toBeLessThanOrEqual(bound);
    expect(Math.max(...Array.from(a, Math.abs))).toBeGreaterThan(0.9 * bound);
    T.dispose([model.params, lora]);
  });

  it('with random B equals the merged model within 1e-5 of the largest logit, and differs from the base', async () => {
    const model = await loadModel(`${FIXTURES}/${name}`, cpu);
    const lora = randomB(T.initLora(model.config, ALL, new T.Rng(2), { backend: cpu }), new T.Rng(3));
    const params = T.withLora(model.params, lora);
    const adapted = logitsOf(model, params, cpu, name);
    const merged = T.mergeLora(params);
    const mergedLogits = logitsOf(model, merged, cpu, name);
    const base = logitsOf(model, model.params, cpu, name);
    const idx = realPositions(readReference(name)).flatMap((p) =>
      Array.from({ length: model.config.vocabSize }, (_, k) => p * model.config.vocabSize + k),
    );
    const scale = Math.max(...idx.map((i) => Math.abs(mergedLogits[i]!)));
    let worst = 0;
    let moved = 0;
    for (const i of idx) {
      worst = Math.max(worst, Math.abs(adapted[i]! - mergedLogits[i]!));
      moved = Math.max(moved, Math.abs(adapted[i]! - base[i]!));
    }
    expect(worst).toBeLessThanOrEqual(1e-5 * scale);
    expect(moved).toBeGreaterThan(1e-3 * scale);
    T.dispose([merged, model.params, lora]);
  });

  it('saves in peft layout and reloads to identical logits; a merged export reloads to the merged logits', async () => {
    const model = await loadModel(`${FIXTURES}/${name}`, cpu);
    const cfg: T.LoraConfig = {
      r: 3,
      alpha: 6,
      dropout: 0.05,
      targetModules: ['q_proj', 'v_proj', 'down_proj'],
      useRslora: true,
    };
    const lora = randomB(T.initLora(model.config, cfg, new T.Rng(4), { backend: cpu }), new T.Rng(5));
    const params = T.withLora(model.params, lora);
    const dir = tmp();
    await T.writeAdapterFiles(dir, lora, cfg, 'Qwen/Qwen3-0.6B');
    // peft's documented format: the config's fields and the tensors' names and [r, in] / [out, r] shapes.
    const json = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    expect(json).toMatchObject({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 3,
      lora_alpha: 6,
      lora_dropout: 0.05,
      target_modules: ['q_proj', 'v_proj', 'down_proj'],
      bias: 'none',
      use_rslora: true,
      base_model_name_or_path: 'Qwen/Qwen3-0.6B',
    });
    const file = T.decodeSafetensors(readFileSync(join(dir, 'adapter_model.safetensors')));
    if (E.isLeft(file)) throw file.left;
    const c = model.config;
    const hd = T.headDim(c);
    expect(file.right.tensors.get('base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight')?.shape).toEqual([
      3,
      c.dModel,
    ]);
    expect(file.right.tensors.get('base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight')?.shape).toEqual([
      c.nHeads * hd,
      3,
    ]);
    expect(
      file.right.tensors.get(`base_model.model.model.layers.${c.nLayers - 1}.mlp.down_proj.lora_A.weight`)?.shape,
    ).toEqual([3, c.dFf]);
    expect(file.right.tensors.size).toBe(c.nLayers * 3 * 2);
    // rsLoRA: alpha / sqrt(r).
    expect(lora.scaling).toBe(6 / Math.sqrt(3));

    const back = await T.readAdapter(dir, model.config, cpu);
    if (E.isLeft(back)) throw back.left;
    expect(back.right.config).toEqual(cfg);
    const again = logitsOf(model, T.withLora(model.params, back.right.lora), cpu, name);
    const before = logitsOf(model, params, cpu, name);
    expect(Buffer.from(again.buffer).equals(Buffer.from(before.buffer))).toBe(true);

    const merged = T.mergeLora(params);
    const out = tmp();
    const saved = await T.saveHfCheckpoint(out, merged, model.config)();
    if (E.isLeft(saved)) throw saved.left;
    const loaded = await loadModel(out, cpu);
    const a = logitsOf(loaded, loaded.params, cpu, name);
    const b = logitsOf(model, merged, cpu, name);
    expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
    T.dispose([merged, loaded.params, model.params, lora, back.right.lora]);
  });
});

describe('LoRA gradients', () => {
  it('reach only the adapters and match central finite differences (f64)', () => {
    const config = T.smallConfig(11, { dModel: 8, nHeads: 2, nKvHeads: 1, dFf: 12, nLayers: 2, maxSeqLen: 8 });
    const on = { backend: reference, dtype: 'f64' as const };
    const base = T.initParams(config, new T.Rng(3), { ...on, std: 0.4 });
    const cfg: T.LoraConfig = { ...ALL, r: 2, alpha: 3 };
    const lora = randomB(T.initLora(config, cfg, new T.Rng(4), on), new T.Rng(5), 0.3);
    const params = T.withLora(base, lora);
    const tokens = T.tensor(new Int32Array([1, 4, 2, 7, 3, 9, 5, 0]), [2, 4], { dtype: 'i32', backend: reference });
    const weights = T.randn([2, 4, 11], new T.Rng(6), { dtype: 'f64', backend: reference });
    const loss = (t: unknown): T.Tensor =>
      T.sum(T.mul(T.forward(T.withTrainable(params, t as never), config, tokens), weights));
    const trainable = T.trainableOf(params);
    const [, grads] = T.valueAndGrad(loss)(trainable);
    // Gradients for the adapters only: 2 layers x 7 modules x (A, B), none for the 11 base tensors per layer.
    expect(treeLeaves(grads).length).toBe(2 * 7 * 2);
    expectTreeGradientsMatch(loss, trainable, grads, { trials: 30 });
  });

  it('dropout zeroes inputs of the A path only while training, scaled by 1 / (1 - p)', () => {
    const config = T.smallConfig(11, { dModel: 8, nHeads: 2, nKvHeads: 2, dFf: 12, nLayers: 1, maxSeqLen: 8 });
    const on = { backend: reference, dtype: 'f64' as const };
    const base = T.initParams(config, new T.Rng(3), { ...on, std: 0.4 });
    const cfg: T.LoraConfig = { ...ALL, dropout: 0.5 };
    const lora = randomB(T.initLora(config, cfg, new T.Rng(4), on), new T.Rng(5), 0.3);
    const tokens = T.tensor(new Int32Array([1, 4, 2, 7]), [1, 4], { dtype: 'i32', backend: reference });
    const run = (p: T.TransformerParams, rng?: T.Rng): Float64Array =>
      T.forward(p, config, tokens, rng ? { dropoutRng: rng } : {}).dataSync() as Float64Array;
    const plain = run(T.withLora(base, lora));
    const noDrop = run(T.withLora(base, { ...lora, dropout: 0 }), new T.Rng(9));
    expect(noDrop).toEqual(plain);
    const dropped = run(T.withLora(base, lora), new T.Rng(9));
    expect(dropped).not.toEqual(plain);
    // The same draws give the same forward; the base model is untouched by dropout.
    expect(run(T.withLora(base, lora), new T.Rng(9))).toEqual(dropped);
    expect(run(base, new T.Rng(9))).toEqual(run(base));
  });
});

describe('adapter_config.json', () => {
  const good = {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    r: 8,
    lora_alpha: 16,
    lora_dropout: 0.05,
    target_modules: ['v_proj', 'q_proj'],
    bias: 'none',
  };
  it('reads peft configs (module order normalised; all-linear expands) and rslora', () => {
    const c = T.parseAdapterConfig(good);
    expect(E.isRight(c) && c.right).toEqual({
      r: 8,
      alpha: 16,
      dropout: 0.05,
      targetModules: ['q_proj', 'v_proj'],
      useRslora: false,
    });
    const all = T.parseAdapterConfig({ ...good, target_modules: 'all-linear', use_rslora: true });
    expect(E.isRight(all) && all.right.targetModules).toEqual([...T.LORA_MODULES]);
  });
  it.each([
    ['peft_type', { peft_type: 'IA3' }],
    ['use_dora', { use_dora: true }],
    ['bias', { bias: 'all' }],
    ['target_modules', { target_modules: ['q_proj', 'lm_head'] }],
    ['modules_to_save', { modules_to_save: ['lm_head'] }],
    ['rank_pattern', { rank_pattern: { q_proj: 4 } }],
    ['r', { r: 0 }],
    ['lora_alpha', { lora_alpha: -1 }],
    ['lora_dropout', { lora_dropout: 1 }],
    // What peft computes differently, which loaded as if absent: refused by name.
    ['lora_bias', { lora_bias: true }],
    ['layer_replication', { layer_replication: [[0, 1]] }],
    ['exclude_modules', { exclude_modules: ['q_proj'] }],
    // Numbers given as other JSON types, which JavaScript's comparisons let through and a save would write back.
    ['lora_dropout', { lora_dropout: '0.1' }],
    ['lora_dropout', { lora_dropout: [0.5] }],
    ['r', { r: '8' }],
    ['lora_alpha', { lora_alpha: [16] }],
  ])('refuses what it cannot compute the same way, naming %s', (field, change) => {
    const c = T.parseAdapterConfig({ ...good, ...change });
    expect(E.isLeft(c) && c.left.field).toBe(field);
    expect(E.isLeft(c) && c.left.message).toContain('adapter_config.json');
  });

  it('refuses an adapter whose tensors do not fit the model, naming the tensor', async () => {
    const model = await loadModel(`${FIXTURES}/qwen3-tiny`, cpu);
    const lora = T.initLora(model.config, { ...ALL, r: 2, targetModules: ['q_proj'] }, new T.Rng(1), { backend: cpu });
    const dir = tmp();
    await T.writeAdapterFiles(dir, lora, { ...ALL, r: 2, targetModules: ['q_proj'] }, null);
    // Claim a module the file does not hold.
    const json = JSON.parse(readFileSync(join(dir, 'adapter_config.json'), 'utf8'));
    writeFileSync(join(dir, 'adapter_config.json'), JSON.stringify({ ...json, target_modules: ['q_proj', 'k_proj'] }));
    const back = await T.readAdapter(dir, model.config, cpu);
    expect(E.isLeft(back) && back.left.kind).toBe('missing-tensor');
    expect(E.isLeft(back) && back.left.field).toContain('k_proj.lora_A');
    T.dispose([model.params, lora]);
  });
});
