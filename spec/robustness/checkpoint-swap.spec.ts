import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { dispose } from '../../src/core/scope.js';
import { type Checkpoint, loadCheckpoint, READ_TRIES, readHooks, saveCheckpoint } from '../../src/io/checkpoint.js';
import { initParams } from '../../src/nn/transformer.js';
import { tinyConfig } from '../policy/helpers/fixtures.js';
import { tempDir } from './helpers/harness.js';

/**
 * A checkpoint read while another run saves over it: the reader gets one whole generation, old or new, and
 * tries again when the one it resolved is removed under it; a checkpoint replaced on every try is busy, never
 * damaged.
 */

describe('a checkpoint read while another run replaces it', () => {
  const config = tinyConfig();
  const params = initParams(config, new Rng(3));
  const save = async (dir: string, step: number): Promise<void> => {
    const res = await saveCheckpoint(dir, { config, params, trainerState: { step } })();
    if (E.isLeft(res)) throw res.left;
  };
  const stepOf = (ck: Checkpoint): unknown => (ck.trainerState as { step?: number } | null)?.step;
  const tmp = (name: string): string => tempDir(`swap-${name}`);
  afterEach(() => {
    readHooks.afterResolve = null;
  });

  it('starts over from the new generation when the one it resolved is removed under it', async () => {
    const dir = join(tmp('swap'), 'checkpoint');
    await save(dir, 1);
    const seen: [string, number][] = [];
    // The writer saves (swaps the link, removes the older generation) right after the reader resolved it.
    readHooks.afterResolve = async (resolved, attempt) => {
      seen.push([resolved.slice(dir.length), attempt]);
      if (attempt === 0) await save(dir, 2);
    };
    const res = await loadCheckpoint(dir)();
    expect(seen).toEqual([
      ['.gen-1', 0],
      ['.gen-2', 1],
    ]);
    expect(E.isRight(res) && stepOf(res.right)).toBe(2);
    if (E.isRight(res)) dispose([res.right.params]);
  });

  it('reports one replaced on every try as busy, never as damaged', async () => {
    const dir = join(tmp('busy'), 'checkpoint');
    await save(dir, 0);
    let saves = 0;
    readHooks.afterResolve = () => save(dir, ++saves);
    const res = await loadCheckpoint(dir)();
    expect(saves).toBe(READ_TRIES);
    expect(E.isLeft(res) && res.left).toMatchObject({ kind: 'io' });
    expect(E.isLeft(res) && res.left.message).toMatch(/replaced 10 times while it was being read/);
  });

  it('loads a whole generation every time while a save loop runs', async () => {
    const dir = join(tmp('loop'), 'checkpoint');
    await save(dir, 0);
    let saving = true;
    let saved = 0;
    const writer = (async () => {
      while (saving) await save(dir, ++saved);
    })();
    const failures: string[] = [];
    try {
      for (let i = 0; i < 20; i++) {
        const res = await loadCheckpoint(dir)();
        if (E.isLeft(res)) failures.push(res.left.message);
        else if (typeof stepOf(res.right) !== 'number') failures.push('no trainer state');
        if (E.isRight(res)) dispose([res.right.params]);
      }
    } finally {
      saving = false;
      await writer;
    }
    expect(failures).toEqual([]);
    expect(saved).toBeGreaterThan(1);
  });
});
