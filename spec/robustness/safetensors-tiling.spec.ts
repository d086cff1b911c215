import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { loadHfCheckpoint } from '../../src/io/hf-checkpoint.js';
import { decodeSafetensors } from '../../src/io/safetensors.js';
import { readSafetensorsIndex } from '../../src/io/safetensors-file.js';

/**
 * The tensors' data_offsets must tile the data section exactly (the safetensors format's rule:
 * sorted by offset, each begins where the previous ends, the first at 0, the last at the end; no overlap, no
 * hole). Files that break it (every tensor misaligned, two tensors over the same bytes) loaded as garbage weights.
 * Both readers refuse them: the in-memory one (checkpoints) and the streaming one (Hub directories).
 */
function file(header: Record<string, unknown>, bodyBytes: number): Uint8Array {
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const h = new TextEncoder().encode(json);
  const out = new Uint8Array(8 + h.length + bodyBytes);
  new DataView(out.buffer).setBigUint64(0, BigInt(h.length), true);
  out.set(h, 8);
  for (let i = 0; i < bodyBytes; i++) out[8 + h.length + i] = (i * 37) % 251;
  return out;
}
const f32 = (n: number, begin: number) => ({ dtype: 'F32', shape: [n], data_offsets: [begin, begin + 4 * n] });

const CASES: [string, Record<string, unknown>, number][] = [
  ['two tensors over the same bytes', { a: f32(4, 0), b: f32(4, 0) }, 16],
  ['overlapping ranges', { a: f32(6, 0), b: f32(4, 16) }, 40],
  ['a hole before the first tensor (every tensor misaligned)', { a: f32(4, 8), b: f32(4, 24) }, 40],
  ['a hole between tensors', { a: f32(4, 0), b: f32(4, 20) }, 36],
  ['bytes after the last tensor', { a: f32(4, 0), b: f32(4, 16) }, 40],
];

describe('data_offsets tile the data section', () => {
  it('a tiled file (in any header order, with an empty tensor) still reads', async () => {
    const ok = file({ b: f32(4, 16), e: { dtype: 'F32', shape: [0], data_offsets: [16, 16] }, a: f32(4, 0) }, 32);
    expect(E.isRight(decodeSafetensors(ok))).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'rlvr-tile-'));
    writeFileSync(join(dir, 'ok.safetensors'), ok);
    expect(E.isRight(await readSafetensorsIndex(join(dir, 'ok.safetensors')))).toBe(true);
  });

  for (const [what, header, body] of CASES) {
    it(`${what}: refused by both readers as bad-offsets naming a tensor (it loaded)`, async () => {
      const bytes = file(header, body);
      const mem = decodeSafetensors(bytes);
      expect(E.isLeft(mem) && mem.left).toMatchObject({ kind: 'bad-offsets' });
      const dir = mkdtempSync(join(tmpdir(), 'rlvr-tile-'));
      writeFileSync(join(dir, 'x.safetensors'), bytes);
      const streamed = await readSafetensorsIndex(join(dir, 'x.safetensors'));
      expect(E.isLeft(streamed) && streamed.left).toMatchObject({ kind: 'bad-offsets', file: 'x.safetensors' });
      if (E.isLeft(streamed)) expect(['a', 'b']).toContain(streamed.left.field);
    });
  }

  it('a Hub model whose two same-shaped tensors share their bytes is refused (it loaded garbage weights)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rlvr-tile-hub-'));
    await cp('spec/fixtures/hf/qwen3-tiny', dir, { recursive: true });
    const path = join(dir, 'model.safetensors');
    const bytes = readFileSync(path);
    const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
    const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, { data_offsets: number[] }>;
    const q = 'model.layers.0.self_attn.q_norm.weight';
    const k = 'model.layers.0.self_attn.k_norm.weight';
    header[k]!.data_offsets = [...header[q]!.data_offsets];
    const body = bytes.subarray(8 + n);
    let json = JSON.stringify(header);
    json += ' '.repeat((8 - (json.length % 8)) % 8);
    const h = Buffer.from(json);
    const len = Buffer.alloc(8);
    len.writeBigUInt64LE(BigInt(h.length));
    writeFileSync(path, Buffer.concat([len, h, body]));
    const r = await loadHfCheckpoint(dir, new CpuBackend())();
    expect(E.isLeft(r) && r.left).toMatchObject({ kind: 'bad-offsets', file: 'model.safetensors' });
  });
});
