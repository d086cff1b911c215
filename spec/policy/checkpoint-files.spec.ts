import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { TypedArray } from '../../src/core/dtype.js';
import { Rng } from '../../src/core/rng.js';
import { CHECKPOINT_FILES, FORMAT, hostTensors, saveCheckpoint } from '../../src/io/checkpoint.js';
import { toHfNames } from '../../src/io/hf.js';
import { adamwInit } from '../../src/nn/optim.js';
import { encodeHeader, encodeSafetensors, type HostTensor } from '../../src/io/safetensors.js';
import {
  f32ToBf16,
  IO_CHUNK_BYTES,
  readSafetensorsIndex,
  STORED,
  streamTensors,
  writeSafetensorsFile,
} from '../../src/io/safetensors-file.js';
import { initParams } from '../../src/nn/transformer.js';
import { tinyConfig } from './helpers/fixtures.js';

/**
 * Issue 25 item 5: checkpoints are written a tensor at a time (`writeSafetensorsFile`), and the files are the
 * same, byte for byte, as the in-memory encoder (`encodeSafetensors`) made them, so checkpoints written before
 * and after read alike and the specs that decode them in memory still hold.
 */
const tmp = mkdtempSync(join(tmpdir(), 'rlvr-ckfiles-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const toWrite = (tensors: ReadonlyMap<string, HostTensor>) =>
  [...tensors].map(([name, t]) => ({
    name,
    shape: t.shape,
    dtype: STORED[t.dtype],
    values: async (): Promise<TypedArray> => t.data,
  }));

describe('writeSafetensorsFile writes what encodeSafetensors encodes', () => {
  it('f32, f64, i32 and empty tensors, names out of order, with metadata: the same bytes', async () => {
    const tensors = new Map<string, HostTensor>([
      ['z.i32', { dtype: 'i32', shape: [2, 2], data: new Int32Array([1, -2, 2 ** 31 - 1, -(2 ** 31)]) }],
      ['b.f64', { dtype: 'f64', shape: [3], data: new Float64Array([Math.PI, -1e-300, Number.MAX_VALUE]) }],
      ['a.f32', { dtype: 'f32', shape: [1, 3], data: new Float32Array([1.5, -0, 3.25]) }],
      ['empty', { dtype: 'f32', shape: [0, 4], data: new Float32Array(0) }],
      ['Ü.f32', { dtype: 'f32', shape: [1], data: new Float32Array([7]) }],
    ]);
    for (const metadata of [{}, { step: '7', producer: FORMAT }] as Record<string, string>[]) {
      const path = join(tmp, 'mixed.safetensors');
      await writeSafetensorsFile(path, toWrite(tensors), 'F32', metadata);
      expect(readFileSync(path).equals(encodeSafetensors(tensors, metadata))).toBe(true);
    }
  });

  it('a tensor over one I/O chunk (64 MiB) is written whole, in order', async () => {
    const n = IO_CHUNK_BYTES / 4 + 1031;
    const big = new Float32Array(n);
    for (let i = 0; i < n; i += 4099) big[i] = i;
    big[n - 1] = -1;
    const tensors = new Map<string, HostTensor>([
      ['big', { dtype: 'f32', shape: [n], data: big }],
      ['after', { dtype: 'f64', shape: [2], data: new Float64Array([1, 2]) }],
    ]);
    const path = join(tmp, 'big.safetensors');
    await writeSafetensorsFile(path, toWrite(tensors), 'F32', { format: 'pt' });
    expect(readFileSync(path).equals(encodeSafetensors(tensors, { format: 'pt' }))).toBe(true);
  });

  it('converted tensors (bf16, f64 values stored as f32) are the same across conversion chunks', async () => {
    const n = 4 * 1024 * 1024 + 5; // past one conversion chunk
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) values[i] = Math.sin(i) * 1e3;
    const path = join(tmp, 'converted.safetensors');
    await writeSafetensorsFile(
      path,
      [
        { name: 'bf16', shape: [n], values: async () => values },
        { name: 'f32', shape: [n], dtype: 'F32', values: async () => values },
      ],
      'BF16',
    );
    const index = await readSafetensorsIndex(path);
    if (E.isLeft(index)) throw index.left;
    expect(index.right.entries.get('bf16')).toMatchObject({ code: 'BF16', shape: [n] });
    const f32 = Float32Array.from(values);
    const bits = new Uint32Array(f32.buffer);
    await streamTensors(index.right, ['bf16', 'f32'], (name, t) => {
      // Compared as bytes: a deep equality over 4M elements takes seconds.
      if (name === 'f32') expect(Buffer.from(t.data.buffer).equals(Buffer.from(f32.buffer))).toBe(true);
      else
        for (const i of [0, 1, 4 * 1024 * 1024 - 1, 4 * 1024 * 1024, n - 1]) {
          const expected = new Float32Array(new Uint32Array([f32ToBf16(bits[i]!) << 16]).buffer)[0];
          expect(t.data[i], `element ${i}`).toBe(expected);
        }
    });
  });

  it('values that do not fit their entry are refused, naming the tensor and file', async () => {
    const path = join(tmp, 'bad.safetensors');
    const short = [{ name: 'w', shape: [4], values: async () => new Float32Array(3) }];
    await expect(writeSafetensorsFile(path, short, 'F32')).rejects.toMatchObject({
      name: 'CheckpointError',
      kind: 'wrong-shape',
      field: 'w',
      file: 'bad.safetensors',
    });
    const floats = [{ name: 'ids', shape: [2], dtype: 'I32' as const, values: async () => new Float32Array([1.5, 2]) }];
    await expect(writeSafetensorsFile(path, floats, 'F32')).rejects.toMatchObject({ kind: 'bad-dtype', field: 'ids' });
  });
});

describe('saveCheckpoint writes the files the in-memory encoder wrote', () => {
  for (const dtype of ['f32', 'f64'] as const) {
    it(`model.safetensors and optimizer.safetensors of ${dtype} parameters, byte for byte`, async () => {
      const config = tinyConfig();
      const params = initParams(config, new Rng(5), { dtype });
      const opt = { ...adamwInit(params), step: 3 };
      const dir = join(tmp, `ck-${dtype}`);
      const saved = await saveCheckpoint(dir, { config, params, optimizer: opt })();
      if (E.isLeft(saved)) throw saved.left;
      const model = encodeSafetensors(await hostTensors(toHfNames(params)), {
        format: 'pt',
        producer: FORMAT,
        dtypes: dtype,
      });
      const moments = new Map([
        ...(await hostTensors(toHfNames(opt.m), 'exp_avg.')),
        ...(await hostTensors(toHfNames(opt.v), 'exp_avg_sq.')),
      ]);
      const optimizer = encodeSafetensors(moments, { step: '3', producer: FORMAT });
      expect(readFileSync(join(dir, CHECKPOINT_FILES.model)).equals(model)).toBe(true);
      expect(readFileSync(join(dir, CHECKPOINT_FILES.optimizer)).equals(optimizer)).toBe(true);
    });
  }
});

describe("the streaming reader checks the header's metadata as the in-memory one does", () => {
  const withMetadata = (metadata: unknown): string => {
    const head = encodeHeader([{ name: 'w', code: 'F32', shape: [1], byteLength: 4 }]);
    const json = JSON.parse(new TextDecoder().decode(head.subarray(8))) as Record<string, unknown>;
    const text = new TextEncoder().encode(JSON.stringify({ __metadata__: metadata, ...json }));
    const out = new Uint8Array(8 + text.length + 4);
    new DataView(out.buffer).setBigUint64(0, BigInt(text.length), true);
    out.set(text, 8);
    const path = join(tmp, 'meta.safetensors');
    writeFileSync(path, out);
    return path;
  };

  it('a non-string value is bad-header naming it; null is no metadata', async () => {
    const bad = await readSafetensorsIndex(withMetadata({ step: 3 }));
    expect(E.isLeft(bad) && bad.left).toMatchObject({
      kind: 'bad-header',
      field: '__metadata__.step',
      file: 'meta.safetensors',
    });
    const list = await readSafetensorsIndex(withMetadata(['pt']));
    expect(E.isLeft(list) && list.left).toMatchObject({ kind: 'bad-header', field: '__metadata__' });
    const none = await readSafetensorsIndex(withMetadata(null));
    expect(E.isRight(none) && none.right.metadata).toEqual({});
  });
});
