import { describe, expect, it } from 'vitest';
import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import * as T from '../../src/index.js';
import { loadHfCheckpoint, type HfModel } from '../../src/io/hf-checkpoint.js';
import { readSafetensorsIndex } from '../../src/io/safetensors-file.js';
import { reference } from '../helpers/compare.js';
import { FIXTURES, inputsOf, readReference } from './helpers.js';

/**
 * `loadHfCheckpoint(dir, backend, { keepDType: true })` on the bf16 fixtures: the matrices stay bf16 on the backend
 * (2 bytes per element in `memory()`), norms and biases are f32, and the logits and the gradients with respect to
 * the f32 parameters (what a LoRA run trains beside the frozen matrices) are bit for bit those of the default load,
 * whose matrices are the same values widened to f32, on the CPU (1 and 2 threads) and reference backends.
 */
const cpu1 = new T.CpuBackend({ threads: 1 });
const cpu2 = new T.CpuBackend({ threads: 2, minParallelWork: 0 });
const bitsOf = (xs: ArrayLike<number>): number[] =>
  Array.from(new Uint32Array((xs instanceof Float32Array ? xs.slice() : Float32Array.from(xs)).buffer));

async function load(dir: string, backend: T.Backend, keepDType: boolean): Promise<HfModel> {
  const m = await loadHfCheckpoint(dir, backend, { keepDType })();
  if (E.isLeft(m)) throw m.left;
  return m.right;
}

/** The leaves of a parameter pytree by Hugging Face-ish path, for naming what differs. */
const leaves = (p: T.TransformerParams): [string, T.Tensor][] => {
  const out: [string, T.Tensor][] = [
    ['embed', p.embed.weight],
    ['finalNorm', p.finalNorm],
  ];
  p.layers.forEach((l, i) => {
    for (const [k, t] of Object.entries(l)) if (t) out.push([`layers.${i}.${k}`, t as T.Tensor]);
  });
  if (p.lmHead) out.push(['lmHead', p.lmHead.weight]);
  return out;
};

/** The trainable (1-D: norms, biases) and frozen (2-D) halves of the parameters, and how to put them together. */
function split(p: T.TransformerParams): { trainable: Record<string, T.Tensor>; frozen: Record<string, T.Tensor> } {
  const trainable: Record<string, T.Tensor> = {};
  const frozen: Record<string, T.Tensor> = {};
  for (const [k, t] of leaves(p)) (t.rank === 1 ? trainable : frozen)[k] = t;
  return { trainable, frozen };
}

function join2(p: T.TransformerParams, parts: Record<string, T.Tensor>): T.TransformerParams {
  const get = (k: string, t: T.Tensor): T.Tensor => parts[k] ?? t;
  return {
    embed: { weight: get('embed', p.embed.weight) },
    finalNorm: get('finalNorm', p.finalNorm),
    layers: p.layers.map((l, i) =>
      Object.fromEntries(Object.entries(l).map(([k, t]) => [k, get(`layers.${i}.${k}`, t as T.Tensor)])),
    ) as unknown as T.LayerParams[],
    ...(p.lmHead ? { lmHead: { weight: get('lmHead', p.lmHead.weight) } } : {}),
  };
}

describe.each([
  ['cpu, 1 thread', cpu1],
  ['cpu, 2 threads', cpu2],
  ['reference', reference],
] as const)('keepDType on %s', (_name, backend) => {
  it.each(['qwen2-tiny', 'qwen3-tiny'])(
    '%s: bf16 matrices, f32 norms and biases, 2 bytes per element, same logits and gradients as the f32 load',
    async (name) => {
      const dir = `${FIXTURES}/${name}`;
      // RoPE's tables are made once per backend and kept: make them first, so the memory counts below are the loads'.
      const warm = await load(dir, backend, false);
      const c = warm.config;
      T.ropeTables(T.headDim(c), c.maxSeqLen, c.ropeTheta, 'f32', backend);
      T.dispose(warm.params);
      const before = backend.memory().bytes;
      const wide = await load(dir, backend, false);
      const wideBytes = backend.memory().bytes - before;
      const half = await load(dir, backend, true);
      const halfBytes = backend.memory().bytes - before - wideBytes;
      let matrixElements = 0;
      for (const [path, t] of leaves(half.params)) {
        expect(t.dtype, path).toBe(t.rank === 2 ? 'bf16' : 'f32');
        if (t.rank === 2) matrixElements += t.size;
      }
      expect(matrixElements).toBeGreaterThan(0);
      expect(leaves(half.params).some(([p]) => p.includes('Norm'))).toBe(true);
      expect(wideBytes - halfBytes).toBe(2 * matrixElements);

      const ref = readReference(name);
      const { tokens, positions, keyBias } = inputsOf(ref, backend);
      const logits = (m: HfModel): number[] =>
        T.tidy(() => bitsOf(T.forward(m.params, m.config, tokens, { positions, keyBias }).dataSync()));
      expect(logits(half)).toEqual(logits(wide));

      // Gradients of the summed log-probs with respect to the 1-D parameters, the matrices frozen (not watched).
      const loss = (m: HfModel) => (trainable: Record<string, T.Tensor>, frozen: Record<string, T.Tensor>) => {
        const params = join2(m.params, { ...frozen, ...trainable });
        const out = T.forward(params, m.config, tokens, { positions, keyBias });
        return T.sum(T.mul(T.logSoftmax(out, -1), 0.01));
      };
      const [hv, hg] = T.valueAndGrad(loss(half))(split(half.params).trainable, split(half.params).frozen);
      const [wv, wg] = T.valueAndGrad(loss(wide))(split(wide.params).trainable, split(wide.params).frozen);
      expect(bitsOf(hv.dataSync())).toEqual(bitsOf(wv.dataSync()));
      expect(Object.keys(hg).sort()).toEqual(Object.keys(wg).sort());
      for (const k of Object.keys(hg)) expect(bitsOf(hg[k]!.dataSync()), k).toEqual(bitsOf(wg[k]!.dataSync()));
      T.dispose([wide.params, half.params, tokens, positions, keyBias, hv, wv, hg, wg]);
      expect(backend.memory().bytes).toBe(before);
    },
  );
});

describe('keepDType refuses non-finite half words as the default load does', () => {
  it('a NaN in a bf16 matrix is a non-finite CheckpointError naming the tensor; allowNonFinite keeps it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'rlvr-keep-'));
    await cp(`${FIXTURES}/qwen3-tiny`, dir, { recursive: true });
    await rm(join(dir, 'reference.safetensors'));
    const file = join(dir, 'model.safetensors');
    const index = await readSafetensorsIndex(file);
    if (E.isLeft(index)) throw index.left;
    const name = 'model.layers.0.mlp.up_proj.weight';
    const entry = index.right.entries.get(name)!;
    expect(entry.code).toBe('BF16');
    const bytes = await readFile(file);
    bytes.writeUInt16LE(0x7fc0, index.right.dataStart + entry.begin + 2 * 5); // element 5: NaN
    await writeFile(file, bytes);
    const r = await loadHfCheckpoint(dir, cpu1, { keepDType: true })();
    expect(E.isLeft(r) && r.left).toMatchObject({ kind: 'non-finite', field: name, file: 'model.safetensors' });
    expect(E.isLeft(r) && r.left.message).toMatch(/NaN at flat index 5/);
    const ok = await loadHfCheckpoint(dir, cpu1, { keepDType: true, allowNonFinite: true })();
    if (E.isLeft(ok)) throw ok.left;
    expect(Number.isNaN(ok.right.params.layers[0]!.wUp.dataSync()[5])).toBe(true);
    T.dispose(ok.right.params);
  });
});
