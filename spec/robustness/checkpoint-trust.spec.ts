import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { MANIFEST } from '../../src/nn/atomic-dir.js';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint } from '../../src/nn/checkpoint.js';
import { adamwInit } from '../../src/nn/optim.js';
import { initParams } from '../../src/nn/transformer.js';
import { sha256Hex } from '../../src/platform/host.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';

/**
 * Issue 19 item 1: the manifest cannot be bypassed. A checkpoint whose manifest is emptied, deleted, of an
 * unknown format, or silent about a file the directory holds is damaged (kind 'corrupt', exit 3), so a flipped
 * byte in model.safetensors is always caught.
 */
const tmp = (name: string): string => mkdtempSync(join(tmpdir(), `rlvr-trust-${name}-`));

async function checkpoint(): Promise<string> {
  const config = tinyConfig();
  const params = initParams(config, new Rng(1));
  const dir = join(tmp('ck'), 'checkpoint');
  const saved = await saveCheckpoint(dir, {
    config,
    params,
    optimizer: adamwInit(params),
    rngs: { train: new Rng(2).state() },
    trainerState: { step: 1 },
  })();
  if (E.isLeft(saved)) throw saved.left;
  return dir;
}

/** Flip a low mantissa bit of the last f32 of model.safetensors: still a valid, finite file, other weights. */
function flipModelByte(dir: string): void {
  const path = join(dir, CHECKPOINT_FILES.model);
  const bytes = readFileSync(path);
  bytes[bytes.length - 4]! ^= 0x01;
  writeFileSync(path, bytes);
}

type ManifestJson = { format: string; files: Record<string, { size: number; sha256: string }> };
const readManifest = (dir: string): ManifestJson => JSON.parse(readFileSync(join(dir, MANIFEST), 'utf8'));
const writeManifest = (dir: string, m: unknown): void => writeFileSync(join(dir, MANIFEST), JSON.stringify(m));

async function refusal(dir: string): Promise<{ kind: string; field: string; message: string }> {
  const r = await loadCheckpoint(dir)();
  if (E.isRight(r)) throw new Error('the damaged checkpoint loaded');
  return r.left;
}

describe('issue 19 item 1: the manifest cannot be bypassed', () => {
  const cases: [string, (dir: string) => void][] = [
    ['emptied (0 bytes)', (dir) => writeFileSync(join(dir, MANIFEST), '')],
    ['emptied ({})', (dir) => writeManifest(dir, {})],
    ['with no files', (dir) => writeManifest(dir, { ...readManifest(dir), files: {} })],
    ['deleted', (dir) => rmSync(join(dir, MANIFEST))],
    [
      "missing the model's entry",
      (dir) => {
        const m = readManifest(dir);
        delete m.files[CHECKPOINT_FILES.model];
        writeManifest(dir, m);
      },
    ],
  ];
  for (const [what, damage] of cases) {
    it(`a manifest ${what} with a flipped byte in model.safetensors is refused as corrupt (it loaded)`, async () => {
      const dir = await checkpoint();
      expect(E.isRight(await loadCheckpoint(dir)())).toBe(true);
      flipModelByte(dir);
      damage(dir);
      const e = await refusal(dir);
      expect(e.kind).toBe('corrupt');
      expect(e.message).toMatch(/manifest\.json|model\.safetensors/);
    });
  }

  it('an unknown manifest format is corrupt, even when every hash agrees', async () => {
    const dir = await checkpoint();
    writeManifest(dir, { ...readManifest(dir), format: 'rlvr-wgpu/manifest-99' });
    expect(await refusal(dir)).toMatchObject({ kind: 'corrupt', field: expect.stringContaining(MANIFEST) });
  });

  it('a file the manifest does not list is corrupt (its hash was never checked)', async () => {
    const dir = await checkpoint();
    writeFileSync(join(dir, 'extra.safetensors'), 'x');
    const e = await refusal(dir);
    expect(e).toMatchObject({ kind: 'corrupt', field: expect.stringContaining('extra.safetensors') });
    expect(e.message).toMatch(/not listed/);
  });

  it('an unknown trainer_state.json format is a damaged checkpoint, with a consistent manifest', async () => {
    const dir = await checkpoint();
    const path = join(dir, CHECKPOINT_FILES.state);
    const state = JSON.parse(readFileSync(path, 'utf8'));
    const text = JSON.stringify({ ...state, format: 'someone-else/7' });
    writeFileSync(path, text);
    const m = readManifest(dir);
    m.files[CHECKPOINT_FILES.state] = { size: Buffer.byteLength(text), sha256: sha256Hex(Buffer.from(text)) };
    writeManifest(dir, m);
    expect(await refusal(dir)).toMatchObject({ kind: 'bad-state', field: 'format' });
  });

  it('a checkpoint path that does not exist is still an io error (a crash before the first save)', async () => {
    expect((await refusal(join(tmp('none'), 'checkpoint'))).kind).toBe('io');
  });
});
