import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, describe, expect, it } from 'vitest';
import { MANIFEST, resolveDir, verifyManifest, writeDirAtomic } from '../../src/io/atomic-dir.js';
import { encodeHeader } from '../../src/io/safetensors.js';
import { readSafetensorsIndex, streamTensors, writeSafetensorsFile } from '../../src/io/safetensors-file.js';

/**
 * Files of any size. A 2.2 GB optimizer.safetensors ended a run with ERR_FS_FILE_TOO_LARGE
 * (whole-file reads stop at 2 GiB, one buffer at 4 GiB, one fs call at 2 GiB). The files here are sparse (a
 * length and a few marker bytes: no disk space, no memory), so sizes past 2^31 and 2^32 cost only the time to
 * read and hash them (about 0.75 s per GiB of SHA-256 on the machine this was written on).
 *
 * What runs, chosen so that every boundary is crossed once and hashing (the cost) stays near 14 GiB: a 2 GiB
 * file (past 2^31) through writeDirAtomic, its manifest entry equal to a hash computed here from its description,
 * and verifyManifest passing; a 4 GiB file (past 2^32) through writeDirAtomic, with a byte flipped near its end
 * (past 2^32) caught by verifyManifest; a 10 GiB safetensors file indexed, its tensors before and past the 4 GiB
 * offset read back exactly, not hashed; one tensor of 2 GiB read whole (2 GiB of memory: the tensor itself).
 * RLVR_LARGE_FILES=1 adds the 10 GiB file through writeDirAtomic and verifyManifest (20 GiB more of hashing)
 * and a 2 GiB tensor written for real (2 GiB of disk, removed after) and read back.
 */
const GiB = 2 ** 30;
const root = mkdtempSync(join(tmpdir(), 'rlvr-large-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

type Markers = ReadonlyMap<number, number>;

/** A sparse file of `size` bytes: zeros but for `markers` (offset -> byte). */
async function sparseFile(path: string, size: number, markers: Markers): Promise<void> {
  const h = await open(path, 'w');
  try {
    await h.truncate(size);
    for (const [at, byte] of markers) await h.write(new Uint8Array([byte]), 0, 1, at);
  } finally {
    await h.close();
  }
}

/** The SHA-256 of such a file, from its description (no file read): what the manifest must say. */
function sparseSha256(size: number, markers: Markers): string {
  const hash = createHash('sha256');
  const zeros = new Uint8Array(8 * 1024 * 1024);
  for (let at = 0; at < size; at += zeros.length) {
    const n = Math.min(zeros.length, size - at);
    const inside = [...markers].filter(([m]) => m >= at && m < at + n);
    if (inside.length === 0) hash.update(zeros.subarray(0, n));
    else {
      const chunk = new Uint8Array(n);
      for (const [m, byte] of inside) chunk[m - at] = byte;
      hash.update(chunk);
    }
  }
  return hash.digest('hex');
}

async function flipByte(path: string, at: number): Promise<void> {
  const h = await open(path, 'r+');
  try {
    const b = new Uint8Array(1);
    await h.read(b, 0, 1, at);
    b[0]! ^= 0x5a;
    await h.write(b, 0, 1, at);
  } finally {
    await h.close();
  }
}

const manifestOf = (dir: string) =>
  JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8')) as { files: Record<string, { size: number; sha256: string }> };

describe('files of any size: written, hashed and verified in chunks', () => {
  it("a 2 GiB file's (past 2^31) manifest entry is its true size and SHA-256, and it verifies", async () => {
    const size = 2 * GiB + 4096 + 1;
    const markers: Markers = new Map([
      [7, 9],
      [2 ** 31 - 1, 10],
      [2 ** 31, 11],
      [size - 1, 12],
    ]);
    const dir = join(root, 'two', 'checkpoint');
    await writeDirAtomic(dir, (tmp) => sparseFile(join(tmp, 'optimizer.safetensors'), size, markers));
    const gen = await resolveDir(dir);
    expect(manifestOf(gen).files['optimizer.safetensors']).toEqual({ size, sha256: sparseSha256(size, markers) });
    expect(await verifyManifest(gen)).toBeNull();
  }, 300_000);

  it('a 4 GiB file (past 2^32) is written and hashed; a byte flipped past 2^32 near its end is caught', async () => {
    const size = 4 * GiB + 4096 + 3;
    const markers: Markers = new Map([
      [0, 1],
      [2 ** 32 - 1, 4],
      [2 ** 32, 5],
      [size - 1, 6],
    ]);
    const dir = join(root, 'four', 'checkpoint');
    await writeDirAtomic(dir, (tmp) => sparseFile(join(tmp, 'big.bin'), size, markers));
    const gen = await resolveDir(dir);
    expect(manifestOf(gen).files['big.bin']!.size).toBe(size);
    await flipByte(join(gen, 'big.bin'), size - 2);
    expect(await verifyManifest(gen)).toEqual({
      file: 'big.bin',
      detail: 'does not match its SHA-256 in the manifest',
    });
  }, 300_000);
});

interface SparseTensor {
  readonly name: string;
  readonly code: 'F32' | 'F64' | 'I32';
  readonly shape: readonly number[];
  /** Bytes written at byte offsets inside the tensor; the rest is a hole (zeros). */
  readonly bytes?: readonly [number, Uint8Array][];
}
const BYTES = { F32: 4, F64: 8, I32: 4 } as const;
const le = (a: Float32Array | Float64Array | Int32Array): Uint8Array => new Uint8Array(a.buffer);

/** A sparse safetensors file: its header, then each tensor's few written bytes, the rest holes. */
async function sparseSafetensors(path: string, tensors: readonly SparseTensor[]): Promise<void> {
  const entries = tensors.map((t) => ({ ...t, byteLength: t.shape.reduce((a, d) => a * d, 1) * BYTES[t.code] }));
  const header = encodeHeader(entries, { producer: 'large-files.spec' });
  const h = await open(path, 'w');
  try {
    await h.write(header, 0, header.length, 0);
    let at = header.length;
    for (const e of entries) {
      for (const [offset, b] of e.bytes ?? []) await h.write(b, 0, b.length, at + offset);
      at += e.byteLength;
    }
    await h.truncate(at);
  } finally {
    await h.close();
  }
}

const LARGE = process.env.RLVR_LARGE_FILES === '1';

describe('safetensors files past 4 GiB: indexed, and read a tensor at a time', () => {
  const hugeBytes = 10 * GiB;
  const tenGiB: readonly SparseTensor[] = [
    { name: 'a.head', code: 'F32', shape: [4], bytes: [[0, le(new Float32Array([1, -2, 3.5, 1e-30]))]] },
    { name: 'b.huge', code: 'F32', shape: [hugeBytes / 4] },
    { name: 'c.tail', code: 'F64', shape: [3], bytes: [[0, le(new Float64Array([Math.PI, -0, 2 ** 60]))]] },
    { name: 'd.ids', code: 'I32', shape: [2], bytes: [[0, le(new Int32Array([-(2 ** 31), 2 ** 31 - 1]))]] },
  ];
  /** Index the 10 GiB file and read the tensors around the huge one (which is never read). */
  const checkTenGiB = async (path: string): Promise<void> => {
    const index = await readSafetensorsIndex(path);
    if (E.isLeft(index)) throw index.left;
    const { entries, dataStart, metadata } = index.right;
    expect(metadata).toEqual({ producer: 'large-files.spec' });
    expect(entries.get('c.tail')).toMatchObject({ begin: 16 + hugeBytes, end: 16 + hugeBytes + 24 });
    expect(entries.get('c.tail')!.begin).toBeGreaterThan(2 ** 33);
    expect(dataStart + entries.get('d.ids')!.end).toBe(statSync(path).size);
    const read = new Map<string, number[]>();
    await streamTensors(index.right, ['d.ids', 'a.head', 'c.tail'], (name, t) => {
      read.set(name, Array.from(t.data));
    });
    expect(read.get('a.head')).toEqual([1, -2, 3.5, Math.fround(1e-30)]);
    expect(read.get('c.tail')).toEqual([Math.PI, -0, 2 ** 60]);
    expect(read.get('d.ids')).toEqual([-(2 ** 31), 2 ** 31 - 1]);
  };

  it('a 10 GiB file: offsets past 2^32 exact, the tensors past them read back exactly', async () => {
    const path = join(root, 'ten.safetensors');
    await sparseSafetensors(path, tenGiB);
    await checkTenGiB(path);
  });

  it.runIf(LARGE)(
    '(RLVR_LARGE_FILES=1) the 10 GiB file through writeDirAtomic and verifyManifest',
    async () => {
      const dir = join(root, 'ten', 'checkpoint');
      await writeDirAtomic(dir, (tmp) => sparseSafetensors(join(tmp, 'model.safetensors'), tenGiB));
      const gen = await resolveDir(dir);
      expect(await verifyManifest(gen)).toBeNull();
      await checkTenGiB(join(gen, 'model.safetensors'));
    },
    600_000,
  );

  it('one tensor over 2 GiB (past what one fs call moves) is read whole, and the next one after it', async () => {
    const n = 2 ** 29 + 5; // 2 GiB + 20 bytes of f32
    const marks: [number, number][] = [
      [0, 1.5],
      [2 ** 29 - 1, 3], // the last f32 before byte 2^31 of the tensor
      [2 ** 29, -2.5], // the first past it
      [n - 1, 7],
    ];
    const path = join(root, 'one-big-tensor.safetensors');
    await sparseSafetensors(path, [
      { name: 'w', code: 'F32', shape: [n], bytes: marks.map(([i, v]) => [4 * i, le(new Float32Array([v]))]) },
      { name: 'x', code: 'F32', shape: [1], bytes: [[0, le(new Float32Array([42]))]] },
    ]);
    const index = await readSafetensorsIndex(path);
    if (E.isLeft(index)) throw index.left;
    const seen: string[] = [];
    await streamTensors(index.right, ['x', 'w'], (name, t) => {
      seen.push(name);
      if (name === 'x') return void expect(Array.from(t.data)).toEqual([42]);
      expect(t.data.length).toBe(n);
      for (const [i, v] of marks) expect(t.data[i], `element ${i}`).toBe(v);
      for (const i of [1, 2 ** 29 - 2, 2 ** 29 + 1, n - 2]) expect(t.data[i], `element ${i}`).toBe(0);
    });
    expect(seen).toEqual(['w', 'x']);
  }, 120_000);

  it.runIf(LARGE)(
    '(RLVR_LARGE_FILES=1) one tensor over 2 GiB is written (real bytes) and read back whole',
    async () => {
      const n = 2 ** 29 + 5;
      const period = 251; // a prime: no chunk size is a multiple of it
      const path = join(root, 'one-big-tensor-written.safetensors');
      await writeSafetensorsFile(
        path,
        [
          {
            name: 'w',
            shape: [n],
            values: async () => {
              const v = new Float32Array(n);
              for (let i = 0; i < period; i++) v[i] = i - 125;
              for (let len = period; len < n; len *= 2) v.copyWithin(len, 0, Math.min(len, n - len));
              return v;
            },
          },
          { name: 'x', shape: [1], values: async () => new Float32Array([42]) },
        ],
        'F32',
      );
      const index = await readSafetensorsIndex(path);
      if (E.isLeft(index)) throw index.left;
      const seen: string[] = [];
      await streamTensors(index.right, ['w', 'x'], (name, t) => {
        seen.push(name);
        if (name === 'x') return void expect(Array.from(t.data)).toEqual([42]);
        expect(t.data.length).toBe(n);
        expect(Array.from(t.data.subarray(0, period))).toEqual(Array.from({ length: period }, (_, i) => i - 125));
        // The first period right and every element equal to the one a period before it: all of it right.
        const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
        expect(bytes.subarray(4 * period).equals(bytes.subarray(0, bytes.length - 4 * period))).toBe(true);
      });
      expect(seen).toEqual(['w', 'x']);
      rmSync(path);
    },
    300_000,
  );
});
