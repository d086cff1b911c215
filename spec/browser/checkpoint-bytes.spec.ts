import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { adamwInit } from '../../src/nn/optim.js';
import { initParams } from '../../src/nn/transformer.js';
import { checkpointFromBytes, checkpointToBlob, checkpointToBytes } from '../../src/io/checkpoint-bytes.js';
import { fromHfNames } from '../../src/io/hf.js';
import { type CheckpointError, decodeSafetensors, encodeSafetensors } from '../../src/io/safetensors.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';

/** The page's checkpoints: one safetensors file in memory (Blob / ArrayBuffer), read back exactly. */
const values = (tree: object): number[][] => treeLeaves(tree).map((t) => Array.from(t.dataSync()));

const right = <A>(e: E.Either<CheckpointError, A>): A => {
  if (E.isLeft(e)) throw e.left;
  return e.right;
};

describe('checkpoints as bytes', () => {
  it('round-trip params, AdamW moments and step, RNG and trainer state through a Blob (f64, bit for bit)', async () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(4), { dtype: 'f64' });
    const init = adamwInit(params);
    const optimizer = { step: 7, m: initParams(config, new Rng(5), { dtype: 'f64' }), v: init.v };
    const rng = new Rng(11);
    rng.normal();
    const blob = right(
      await checkpointToBlob({
        config,
        params,
        optimizer,
        rngs: { train: rng.state() },
        trainerState: { phase: 'rl', step: 7 },
      })(),
    );
    const ck = right(await checkpointFromBytes(blob)());
    expect(ck.config).toEqual(config);
    expect(values(ck.params)).toEqual(values(params));
    expect(ck.optimizer!.step).toBe(7);
    expect(values(ck.optimizer!.m)).toEqual(values(optimizer.m));
    expect(values(ck.optimizer!.v)).toEqual(values(optimizer.v));
    expect(ck.trainerState).toEqual({ phase: 'rl', step: 7 });
    const resumed = Rng.fromState(ck.rngs!.train!);
    expect([resumed.normal(), resumed.uniform()]).toEqual([rng.normal(), rng.uniform()]);
  });

  it('is a plain safetensors file: HF names for weights, exp_avg.* for moments, config in the metadata', async () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(6));
    const bytes = right(await checkpointToBytes({ config, params, optimizer: adamwInit(params) })());
    const file = right(decodeSafetensors(bytes));
    expect(file.tensors.has('model.layers.1.self_attn.k_proj.weight')).toBe(true);
    expect(file.tensors.has('exp_avg_sq.model.norm.weight')).toBe(true);
    expect(JSON.parse(file.metadata.config!)).toMatchObject({
      model_type: 'llama',
      hidden_size: config.dModel,
      torch_dtype: 'float32',
    });
    const weightsOnly = new Map([...file.tensors].filter(([n]) => !n.startsWith('exp_avg')));
    expect(values(right(fromHfNames(weightsOnly, config)))).toEqual(values(params));
    // Weights only (no optimizer): no moments, no step, and an ArrayBuffer is accepted too.
    const plain = right(await checkpointToBytes({ config, params })());
    const back = right(await checkpointFromBytes(plain.slice().buffer)());
    expect(back.optimizer).toBeUndefined();
    expect(right(decodeSafetensors(plain)).metadata.step).toBeUndefined();
  });

  it('names what is wrong in a damaged file', async () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(7));
    const file = right(
      decodeSafetensors(right(await checkpointToBytes({ config, params, optimizer: adamwInit(params) })())),
    );
    const variant = async (
      tensors: Map<string, unknown>,
      metadata: Record<string, string>,
    ): Promise<CheckpointError> => {
      const r = await checkpointFromBytes(encodeSafetensors(tensors as typeof file.tensors, metadata))();
      if (E.isRight(r)) throw new Error('expected a CheckpointError');
      return r.left;
    };
    const tensors = new Map(file.tensors);
    const { config: configJson, ...noConfig } = file.metadata;
    expect(await variant(tensors, noConfig)).toMatchObject({ kind: 'bad-header', field: '__metadata__.config' });
    expect(await variant(tensors, { ...file.metadata, config: '{' })).toMatchObject({
      kind: 'bad-header',
      field: '__metadata__.config',
    });
    expect(
      await variant(tensors, {
        ...file.metadata,
        config: configJson!.replace('"hidden_size":16', '"hidden_size":"16"'),
      }),
    ).toMatchObject({ kind: 'bad-config', field: 'hidden_size' });
    expect(await variant(tensors, { ...file.metadata, step: '-1' })).toMatchObject({
      kind: 'bad-state',
      field: '__metadata__.step',
    });
    const noMoment = new Map(tensors);
    noMoment.delete('exp_avg.model.norm.weight');
    expect(await variant(noMoment, file.metadata)).toMatchObject({
      kind: 'missing-tensor',
      field: 'exp_avg.model.norm.weight',
    });
    expect(
      await variant(tensors, {
        ...file.metadata,
        trainer_state: '{"format": "rlvr-wgpu/1", "rngs": {"train": {"s": [1]}}}',
      }),
    ).toMatchObject({ kind: 'bad-state', field: 'rngs.train' });
  });
});
