import { describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import * as T from '../../src/index.js';
import { loadHfCheckpoint, saveHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { decodeBytes, type CheckpointError } from '../../src/io/safetensors.js';
import { f32ToBf16 } from '../../src/io/safetensors-file.js';
import { FIXTURES, inputsOf, loadModel, readReference } from './helpers.js';

/**
 * Hub directories: half-precision decoding against closed forms, sharded loading, every bad directory a typed
 * error naming the file and the field, and save -> reload giving the same logits (bf16 saves reproduce the
 * original bytes of a bf16 checkpoint, since widening is exact and rounding back is then exact too).
 */
const cpu = new T.CpuBackend();
const QWEN3 = `${FIXTURES}/qwen3-tiny`;

async function scratch(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'rlvr-hf-'));
}

async function copyOf(src: string): Promise<string> {
  const dir = await scratch();
  await cp(src, dir, { recursive: true });
  await rm(join(dir, 'reference.safetensors'));
  return dir;
}

async function logitsOf(dir: string): Promise<Float32Array> {
  const ref = readReference('qwen3-tiny');
  const model = await loadModel(dir, cpu);
  const { tokens, positions, keyBias } = inputsOf(ref, cpu);
  const out = T.tidy(() =>
    T.forward(model.params, model.config, tokens, { positions, keyBias }),
  ).dataSync() as Float32Array;
  T.dispose([model.params, tokens, positions, keyBias]);
  return out;
}

async function loadError(dir: string): Promise<CheckpointError> {
  const r = await loadHfCheckpoint(dir, cpu)();
  if (E.isRight(r)) throw new Error('expected the load to fail');
  return r.left;
}

const u16 = (xs: number[]): Uint8Array => new Uint8Array(new Uint16Array(xs).buffer);

describe('Hub checkpoint directories', () => {
  it('decodes bf16 and f16 exactly (closed forms, subnormals, infinities)', () => {
    expect(
      Array.from(decodeBytes(u16([0x3c00, 0xc000, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0xfc00, 0x3555]), 'F16')),
    ).toEqual([1, -2, 2 ** -24, 1023 * 2 ** -24, 65504, Infinity, -Infinity, 0.25 * (1 + 0x155 / 1024)]);
    expect(Array.from(decodeBytes(u16([0x3f80, 0xc049, 0x0001, 0x7f80, 0x4049]), 'BF16'))).toEqual([
      1,
      -3.140625,
      2 ** -133,
      Infinity,
      3.140625,
    ]);
    // Rounding to bf16 is to nearest even: 1 + 2^-8 is a tie (down to 1), 1 + 3 * 2^-8 rounds up.
    const bits = (x: number): number => new Uint32Array(new Float32Array([x]).buffer)[0]!;
    expect([f32ToBf16(bits(1 + 2 ** -8)), f32ToBf16(bits(1 + 3 * 2 ** -8)), f32ToBf16(bits(-2))]).toEqual([
      0x3f80, 0x3f82, 0xc000,
    ]);
  });

  it('loads a sharded checkpoint (index.json) to the same logits as the single file', async () => {
    const dir = await copyOf(QWEN3);
    const file = T.decodeSafetensors(readFileSync(join(dir, 'model.safetensors')));
    if (E.isLeft(file)) throw file.left;
    const names = [...file.right.tensors.keys()].sort();
    const halves = [names.slice(0, 10), names.slice(10)];
    const weightMap: Record<string, string> = {};
    for (const [k, part] of halves.entries()) {
      const shard = `model-0000${k + 1}-of-00002.safetensors`;
      await writeFile(join(dir, shard), T.encodeSafetensors(new Map(part.map((n) => [n, file.right.tensors.get(n)!]))));
      for (const n of part) weightMap[n] = shard;
    }
    await rm(join(dir, 'model.safetensors'));
    await writeFile(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: weightMap }));
    expect(Array.from(await logitsOf(dir))).toEqual(Array.from(await logitsOf(QWEN3)));

    // A missing shard names the file; a truncated one names the file and the first tensor cut off.
    await truncate(join(dir, 'model-00002-of-00002.safetensors'), 3000);
    const cut = await loadError(dir);
    expect([cut.kind, cut.file]).toEqual(['truncated', 'model-00002-of-00002.safetensors']);
    expect(names.slice(10)).toContain(cut.field);
    await rm(join(dir, 'model-00002-of-00002.safetensors'));
    expect(await loadError(dir)).toMatchObject({ kind: 'missing-file', file: 'model-00002-of-00002.safetensors' });
    await rm(dir, { recursive: true });
  });

  it('every bad directory is a typed error naming the file and the field', async () => {
    const dir = await copyOf(QWEN3);
    const config = JSON.parse(await readFile(join(dir, 'config.json'), 'utf8'));
    const withConfig = async (c: unknown): Promise<CheckpointError> => {
      await writeFile(join(dir, 'config.json'), JSON.stringify(c));
      return loadError(dir);
    };
    expect(await withConfig({ ...config, architectures: ['GPT2LMHeadModel'] })).toMatchObject({
      kind: 'bad-config',
      field: 'architectures',
      file: 'config.json',
    });
    expect(await withConfig({ ...config, rope_scaling: { type: 'linear', factor: 2 } })).toMatchObject({
      kind: 'bad-config',
      field: 'rope_scaling',
      file: 'config.json',
    });
    // A config whose sizes disagree with the weights: the first tensor of another shape is named.
    expect(await withConfig({ ...config, intermediate_size: 128 })).toMatchObject({
      kind: 'wrong-shape',
      field: 'model.layers.0.mlp.gate_proj.weight',
      file: 'model.safetensors',
    });
    // Qwen2 expects biases the Qwen3 file lacks; Llama has no q/k norms, which the file holds.
    expect(await withConfig({ ...config, architectures: ['Qwen2ForCausalLM'] })).toMatchObject({
      kind: 'missing-tensor',
      field: 'model.layers.0.self_attn.q_proj.bias',
    });
    expect(await withConfig({ ...config, architectures: ['LlamaForCausalLM'] })).toMatchObject({
      kind: 'unexpected-tensor',
      field: 'model.layers.0.self_attn.k_norm.weight',
    });
    expect(await withConfig({ ...config, tie_word_embeddings: false })).toMatchObject({
      kind: 'missing-tensor',
      field: 'lm_head.weight',
    });
    await rm(join(dir, 'config.json'));
    expect(await loadError(dir)).toMatchObject({ kind: 'missing-file', field: 'config.json' });
    await writeFile(join(dir, 'config.json'), JSON.stringify(config));
    await truncate(join(dir, 'model.safetensors'), 100_000);
    expect(await loadError(dir)).toMatchObject({ kind: 'truncated', file: 'model.safetensors' });
    await rm(join(dir, 'model.safetensors'));
    expect(await loadError(dir)).toMatchObject({ kind: 'missing-file', file: 'model.safetensors' });
    await rm(dir, { recursive: true });
  });

  it('saves a Hub directory that reloads to the same logits; bf16 reproduces the original bytes', async () => {
    const model = await loadModel(QWEN3, cpu);
    const f32Dir = await scratch();
    const bf16Dir = await scratch();
    for (const [dir, dtype] of [
      [f32Dir, 'f32'],
      [bf16Dir, 'bf16'],
    ] as const) {
      const saved = await saveHfCheckpoint(dir, model.params, model.config, {
        dtype,
        extraConfig: { eos_token_id: 2 },
        companionsFrom: QWEN3,
      })();
      if (E.isLeft(saved)) throw saved.left;
    }
    const want = await logitsOf(QWEN3);
    expect(Array.from(await logitsOf(f32Dir))).toEqual(Array.from(want));
    expect(Array.from(await logitsOf(bf16Dir))).toEqual(Array.from(want));
    const original = T.decodeSafetensors(readFileSync(join(QWEN3, 'model.safetensors')));
    const written = readFileSync(join(bf16Dir, 'model.safetensors'));
    if (E.isLeft(original)) throw original.left;
    const header = JSON.parse(
      new TextDecoder().decode(written.subarray(8, 8 + Number(written.readBigUInt64LE(0)))),
    ) as Record<string, { dtype: string; shape: number[] }>;
    expect(
      Object.keys(header)
        .filter((k) => k !== '__metadata__')
        .sort(),
    ).toEqual([...original.right.tensors.keys()].sort());
    expect(
      Object.values(header)
        .filter((h) => h.dtype !== undefined)
        .every((h) => h.dtype === 'BF16'),
    ).toBe(true);
    const reread = T.decodeSafetensors(written);
    if (E.isLeft(reread)) throw reread.left;
    for (const [n, t] of original.right.tensors)
      expect(Array.from(reread.right.tensors.get(n)!.data), n).toEqual(Array.from(t.data));
    const saved = JSON.parse(await readFile(join(bf16Dir, 'config.json'), 'utf8'));
    expect(saved).toMatchObject({
      architectures: ['Qwen3ForCausalLM'],
      model_type: 'qwen3',
      head_dim: 16,
      tie_word_embeddings: true,
      torch_dtype: 'bfloat16',
      eos_token_id: 2,
    });
    expect(JSON.parse(await readFile(join(bf16Dir, 'generation_config.json'), 'utf8')).eos_token_id).toBe(2);
    T.dispose(model.params);
    await rm(f32Dir, { recursive: true });
    await rm(bf16Dir, { recursive: true });
  });
});
