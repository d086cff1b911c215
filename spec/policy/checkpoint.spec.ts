import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { treeLeaves } from '../../src/core/pytree.js';
import { initParams } from '../../src/nn/transformer.js';
import { adamwInit } from '../../src/nn/optim.js';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint } from '../../src/io/checkpoint.js';
import { resealManifest } from '../robustness/helpers/manifest.js';
import { MANIFEST } from '../../src/io/atomic-dir.js';
import { fromHfNames, toHfNames } from '../../src/io/hf.js';
import { CheckpointError, decodeSafetensors, encodeSafetensors, type HostTensor } from '../../src/io/safetensors.js';
import { config as runConfig, initRun, trainStep } from './helpers/resume-run.js';
import { tinyConfig } from './helpers/fixtures.js';

const tmp = mkdtempSync(join(tmpdir(), 'rlvr-ckpt-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const errorOf = <A>(e: E.Either<CheckpointError, A>): CheckpointError => {
  if (E.isRight(e)) throw new Error('expected a CheckpointError');
  expect(e.left).toBeInstanceOf(CheckpointError);
  return e.left;
};

/** A safetensors file from a literal header object and body bytes (for corrupt inputs). */
function rawFile(header: unknown, body: Uint8Array, headerLength?: bigint): Uint8Array {
  const json = new TextEncoder().encode(typeof header === 'string' ? header : JSON.stringify(header));
  const out = new Uint8Array(8 + json.length + body.length);
  new DataView(out.buffer).setBigUint64(0, headerLength ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(body, 8 + json.length);
  return out;
}

describe('safetensors', () => {
  it('round-trips f32, f64 and i32 tensors with metadata, in the documented layout', () => {
    const tensors = new Map<string, HostTensor>([
      ['b.f64', { dtype: 'f64', shape: [2, 1], data: new Float64Array([Math.PI, -1e-300]) }],
      ['a.f32', { dtype: 'f32', shape: [3], data: new Float32Array([1.5, -2, 3.25]) }],
      ['c.i32', { dtype: 'i32', shape: [2, 2], data: new Int32Array([1, -2, 2 ** 31 - 1, 0]) }],
      ['empty', { dtype: 'f32', shape: [0, 4], data: new Float32Array(0) }],
    ]);
    const bytes = encodeSafetensors(tensors, { step: '7' });
    const n = Number(new DataView(bytes.buffer).getBigUint64(0, true));
    expect((8 + n) % 8).toBe(0);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n))) as Record<
      string,
      { dtype: string; shape: number[]; data_offsets: number[] }
    >;
    expect(header['a.f32']).toEqual({ dtype: 'F32', shape: [3], data_offsets: [0, 12] });
    expect(header.__metadata__).toEqual({ step: '7' });
    expect(new Float32Array(bytes.slice(8 + n, 8 + n + 12).buffer)).toEqual(new Float32Array([1.5, -2, 3.25]));
    const decoded = decodeSafetensors(bytes);
    if (E.isLeft(decoded)) throw decoded.left;
    expect(decoded.right.metadata).toEqual({ step: '7' });
    for (const [name, t] of tensors) expect(decoded.right.tensors.get(name)).toEqual(t);
  });

  it('reads BF16 and F16 (as real checkpoints store them) as f32', () => {
    const body = new Uint8Array([0xc0, 0x3f, 0x00, 0x3e]); // bf16 1.5, f16 1.5 (little-endian)
    const f = decodeSafetensors(
      rawFile(
        {
          x: { dtype: 'BF16', shape: [1], data_offsets: [0, 2] },
          y: { dtype: 'F16', shape: [1], data_offsets: [2, 4] },
        },
        body,
      ),
    );
    if (E.isLeft(f)) throw f.left;
    expect(Array.from(f.right.tensors.get('x')!.data)).toEqual([1.5]);
    expect(Array.from(f.right.tensors.get('y')!.data)).toEqual([1.5]);
  });

  it('answers corrupt files with a typed error naming the bad field or tensor', () => {
    const ok = { w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } };
    const body = new Uint8Array(8);
    const cases: [Uint8Array, string, string][] = [
      [new Uint8Array(5), 'bad-header', 'header length'],
      [rawFile(ok, body, 10n ** 12n), 'bad-header', 'header length'],
      [rawFile('{"w": {', body), 'bad-header', 'header'],
      [rawFile('[1,2]', body), 'bad-header', 'header'],
      [rawFile({ w: { dtype: 'Q4', shape: [2], data_offsets: [0, 8] } }, body), 'bad-dtype', 'w'],
      [rawFile({ w: { dtype: 'F32', shape: [2.5], data_offsets: [0, 8] } }, body), 'bad-header', 'w'],
      [rawFile({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 16] } }, body), 'bad-offsets', 'w'],
      [rawFile({ w: { dtype: 'F32', shape: [3], data_offsets: [0, 8] } }, body), 'bad-offsets', 'w'],
      [rawFile({ w: { dtype: 'F32', shape: [2] } }, body), 'bad-offsets', 'w'],
      [rawFile({ __metadata__: { step: 3 }, ...ok }, body), 'bad-header', '__metadata__.step'],
    ];
    for (const [bytes, kind, field] of cases) {
      const err = errorOf(decodeSafetensors(bytes));
      expect([err.kind, err.field]).toEqual([kind, field]);
    }
  });

  it('maps parameters to Hugging Face Llama names and checks every tensor on the way back', () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(1));
    const host = new Map(
      [...toHfNames(params)].map(([n, t]) => [n, { dtype: t.dtype, shape: t.shape, data: t.dataSync() } as HostTensor]),
    );
    expect([...host.keys()]).toContain('model.layers.1.self_attn.k_proj.weight');
    expect(host.get('model.layers.0.mlp.down_proj.weight')!.shape).toEqual([config.dModel, config.dFf]);
    const back = fromHfNames(host, config);
    if (E.isLeft(back)) throw back.left;
    expect(treeLeaves(back.right).map((t) => Array.from(t.dataSync()))).toEqual(
      treeLeaves(params).map((t) => Array.from(t.dataSync())),
    );

    const without = new Map(host);
    without.delete('model.norm.weight');
    expect(errorOf(fromHfNames(without, config))).toMatchObject({ kind: 'missing-tensor', field: 'model.norm.weight' });
    const wrong = new Map(host).set('model.layers.0.self_attn.q_proj.weight', {
      dtype: 'f32',
      shape: [3, 3],
      data: new Float32Array(9),
    });
    expect(errorOf(fromHfNames(wrong, config))).toMatchObject({
      kind: 'wrong-shape',
      field: 'model.layers.0.self_attn.q_proj.weight',
    });
    const extra = new Map(host).set('lm_head.weight', host.get('model.embed_tokens.weight')!);
    expect(errorOf(fromHfNames(extra, config))).toMatchObject({ kind: 'unexpected-tensor', field: 'lm_head.weight' });
  });
});

describe('checkpoints', () => {
  it('save and load params, optimizer state, RNG states and trainer state', async () => {
    const config = tinyConfig();
    const params = initParams(config, new Rng(2), { dtype: 'f64' });
    const opt = { ...adamwInit(params), step: 5 };
    const rng = new Rng(9);
    rng.normal();
    const dir = join(tmp, 'roundtrip');
    const saved = await saveCheckpoint(dir, {
      config,
      params,
      optimizer: opt,
      rngs: { sampling: rng.state() },
      trainerState: { step: 5, note: 'x' },
    })();
    expect(E.isRight(saved)).toBe(true);
    const loaded = await loadCheckpoint(dir)();
    if (E.isLeft(loaded)) throw loaded.left;
    const ck = loaded.right;
    expect(ck.config).toEqual(config);
    expect(ck.params.embed.weight.dtype).toBe('f64');
    expect(treeLeaves(ck.params).map((t) => Array.from(t.dataSync()))).toEqual(
      treeLeaves(params).map((t) => Array.from(t.dataSync())),
    );
    expect(ck.optimizer!.step).toBe(5);
    expect(treeLeaves(ck.optimizer!.v).length).toBe(treeLeaves(params).length);
    expect(ck.trainerState).toEqual({ step: 5, note: 'x' });
    const resumed = Rng.fromState(ck.rngs!.sampling!);
    expect([resumed.normal(), resumed.uniform()]).toEqual([rng.normal(), rng.uniform()]);
    const cfg = JSON.parse(readFileSync(join(dir, CHECKPOINT_FILES.config), 'utf8')) as Record<string, unknown>;
    expect(cfg).toMatchObject({
      model_type: 'llama',
      hidden_size: config.dModel,
      num_key_value_heads: config.nKvHeads,
      tie_word_embeddings: true,
    });
  });

  it('reports a damaged or missing checkpoint as a typed error', async () => {
    const config = tinyConfig();
    const dir = join(tmp, 'damaged');
    await saveCheckpoint(dir, { config, params: initParams(config, new Rng(3)) })();
    const model = join(dir, CHECKPOINT_FILES.model);
    const bytes = readFileSync(model);
    writeFileSync(model, bytes.subarray(0, bytes.length - 4));
    // The manifest (sizes and hashes, written last) catches it first; without one the checkpoint is damaged; with
    // a manifest resealed over the damage, the reader's own checks catch it (the streaming reader compares the
    // header with the file's size: truncated, naming the file and the tensor cut off).
    expect(errorOf(await loadCheckpoint(dir)())).toMatchObject({ kind: 'corrupt', field: model });
    rmSync(join(dir, MANIFEST));
    expect(errorOf(await loadCheckpoint(dir)())).toMatchObject({ kind: 'corrupt', field: join(dir, MANIFEST) });
    resealManifest(dir);
    expect(errorOf(await loadCheckpoint(dir)())).toMatchObject({
      kind: 'truncated',
      file: CHECKPOINT_FILES.model,
      field: 'model.norm.weight',
    });
    writeFileSync(join(dir, CHECKPOINT_FILES.config), '{"hidden_size": "big"}');
    resealManifest(dir);
    expect(errorOf(await loadCheckpoint(dir)()).kind).toBe('bad-config');
    expect(errorOf(await loadCheckpoint(join(tmp, 'nowhere'))()).kind).toBe('io');
  });

  it('save, kill and resume gives the same next-step loss as an uninterrupted run', async () => {
    const seed = 21;
    const steps = 3;
    // Uninterrupted: steps + 2 steps in this process. The loss of step steps+2 depends on the AdamW moments and
    // step count used by the resumed update, not only on the parameters and the RNG.
    let state = initRun(seed);
    const losses: number[] = [];
    for (let i = 0; i <= steps + 1; i++) {
      const r = await trainStep(state);
      losses.push(r.loss);
      state = r.next;
    }
    // Interrupted: another process trains `steps` steps, saves, and is killed.
    const dir = join(tmp, 'resume');
    const child = spawn(
      join('node_modules', '.bin', 'vite-node'),
      ['--config', 'vitest.config.ts', join('spec', 'policy', 'helpers', 'resume-child.ts')],
      {
        env: { ...process.env, RESUME_DIR: dir, RESUME_STEPS: String(steps), RESUME_SEED: String(seed) },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => d.toString().includes('saved') && resolve());
      child.on('exit', (code) => reject(new Error(`child exited (${code}) before saving: ${stderr}`)));
    });
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    // Resume into fresh objects.
    const loaded = await loadCheckpoint(dir)();
    if (E.isLeft(loaded)) throw loaded.left;
    const ck = loaded.right;
    expect(ck.config).toEqual(runConfig);
    expect(ck.trainerState).toEqual({ step: steps });
    const resumed = await trainStep({ params: ck.params, opt: ck.optimizer!, rng: Rng.fromState(ck.rngs!.train!) });
    expect(resumed.loss).toBe(losses[steps]);
    expect((await trainStep(resumed.next)).loss).toBe(losses[steps + 1]);
    expect(losses.slice(1).every((l) => l !== losses[0])).toBe(true);
  }, 60_000);
});
