import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src/cli/args.js';
import { Rng } from '../../src/core/rng.js';
import { MANIFEST } from '../../src/io/atomic-dir.js';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint } from '../../src/io/checkpoint.js';
import { adamwInit } from '../../src/nn/optim.js';
import { CheckpointError, decodeSafetensors, encodeSafetensors } from '../../src/io/safetensors.js';
import { initParams, smallConfig } from '../../src/nn/transformer.js';
import { TrainConfigError } from '../../src/training/config.js';
import { checkBounds } from '../../src/training/bounds.js';

/**
 * Fuzzing as tests: random argument vectors at the CLI parser, random and mutated bytes at the
 * safetensors and checkpoint loaders. The property is the same everywhere: an answer (a value or a typed error
 * in an Either), never a thrown exception, a crash or a hang.
 */
const FLAGS = [
  '--task',
  '--objective',
  '--backend',
  '--output',
  '--resume',
  '--seed',
  '--steps',
  '--d-model',
  '--n-layers',
  '--n-heads',
  '--n-kv-heads',
  '--eval-prompts',
  '--max-completion-length',
  '--learning-rate',
  '--num-generations',
  '--epsilon',
  '--beta',
  '--loss-type',
  '--scale-rewards',
  '--bicc',
  '--overwrite',
  '--on-non-finite',
  '--advantage',
  '--top-p',
  '--temperature',
];
const VALUES = [
  '0',
  '1',
  '-1',
  '1e308',
  '1e-400',
  'NaN',
  'Infinity',
  '',
  ' ',
  '2.5',
  '0x10',
  'grpo',
  'addition',
  'skip',
  '--',
  '-h',
  'é',
];

describe('fuzz: the CLI parser', () => {
  it('answers every argument vector with a config or a TrainConfigError naming a field', () => {
    const token = fc.oneof(
      fc.constantFrom(...FLAGS),
      fc.constantFrom(...VALUES),
      fc.string({ maxLength: 12 }),
      fc.double().map(String),
    );
    fc.assert(
      fc.property(fc.array(token, { maxLength: 12 }), (argv) => {
        const r = parseTrainArgs(argv);
        if (E.isLeft(r)) {
          expect(r.left).toBeInstanceOf(TrainConfigError);
          expect(r.left.field.length).toBeGreaterThan(0);
        } else {
          // a parsed config is within the bounds or the bounds say why (never an untyped error)
          const b = checkBounds(r.right);
          expect(b === null || b instanceof TrainConfigError).toBe(true);
        }
      }),
      { numRuns: 400 },
    );
  });
});

const decodes = (bytes: Uint8Array): void => {
  const r = decodeSafetensors(bytes);
  if (E.isLeft(r)) expect(r.left).toBeInstanceOf(CheckpointError);
};

describe('fuzz: the safetensors reader', () => {
  const real = encodeSafetensors(
    new Map([
      ['a', { dtype: 'f32' as const, shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, 6]) }],
      ['b', { dtype: 'i32' as const, shape: [4], data: new Int32Array([7, 8, 9, 10]) }],
    ]),
    { step: '3' },
  );

  it('answers random byte strings with a typed error', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), decodes), { numRuns: 300 });
    // a plausible header length followed by junk
    const withLength = fc
      .tuple(fc.integer({ min: 0, max: 300 }), fc.uint8Array({ maxLength: 300 }))
      .map(([n, rest]) => {
        const out = new Uint8Array(8 + rest.length);
        new DataView(out.buffer).setBigUint64(0, BigInt(n), true);
        out.set(rest, 8);
        return out;
      });
    fc.assert(fc.property(withLength, decodes), { numRuns: 300 });
  });

  it('answers mutated real files (flipped bytes, truncations, insertions, huge lengths) with a value or a typed error', () => {
    const mutation = fc.oneof(
      fc.tuple(fc.constant('flip'), fc.nat(real.length - 1), fc.integer({ min: 1, max: 255 })),
      fc.tuple(fc.constant('cut'), fc.nat(real.length - 1), fc.constant(0)),
      fc.tuple(fc.constant('insert'), fc.nat(real.length - 1), fc.integer({ min: 0, max: 255 })),
      fc.tuple(fc.constant('length'), fc.constant(0), fc.integer({ min: 0, max: 255 })),
    );
    fc.assert(
      fc.property(fc.array(mutation, { minLength: 1, maxLength: 4 }), (ms) => {
        let b = real.slice();
        for (const [kind, at, v] of ms) {
          if (kind === 'flip') b[at % b.length]! ^= v;
          else if (kind === 'cut') b = b.slice(0, at % (b.length + 1));
          else if (kind === 'insert') b = new Uint8Array([...b.slice(0, at), v, ...b.slice(at)]);
          else if (b.length >= 8) b[7 - (v % 8)] = v; // the high bytes of the header length
        }
        decodes(b);
      }),
      { numRuns: 500 },
    );
  });
});

describe('fuzz: the checkpoint loader', () => {
  it('answers a checkpoint with a mutated, truncated or missing file with a typed error (never a throw)', async () => {
    const config = smallConfig(12, { dModel: 8, nLayers: 1, nHeads: 2, nKvHeads: 1, dFf: 16, maxSeqLen: 8 });
    const params = initParams(config, new Rng(1));
    const source = mkdtempSync(join(tmpdir(), 'rlvr-fuzz-src-'));
    const saved = await saveCheckpoint(source, {
      config,
      params,
      optimizer: adamwInit(params),
      rngs: { train: new Rng(2).state() },
      trainerState: { step: 1 },
    })();
    expect(E.isRight(saved)).toBe(true);
    const files = Object.values(CHECKPOINT_FILES).map((f) => [f, readFileSync(join(source, f))] as const);
    const manifest = readFileSync(join(source, MANIFEST));
    const work = mkdtempSync(join(tmpdir(), 'rlvr-fuzz-'));
    let n = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.nat(files.length - 1),
        fc.oneof(fc.constant('flip' as const), fc.constant('cut' as const), fc.constant('delete' as const)),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        fc.boolean(),
        async (which, kind, at, v, keepManifest) => {
          const dir = join(work, String(n++));
          mkdirSync(dir);
          for (const [f, bytes] of files) writeFileSync(join(dir, f), bytes);
          if (keepManifest) writeFileSync(join(dir, MANIFEST), manifest);
          const [name, bytes] = files[which]!;
          if (kind === 'delete') rmSync(join(dir, name));
          else {
            const b = Uint8Array.from(bytes);
            if (kind === 'flip') b[at % b.length]! ^= v;
            writeFileSync(join(dir, name), kind === 'cut' ? b.subarray(0, at % b.length) : b);
          }
          const r = await loadCheckpoint(dir)();
          // Every change is caught: by the manifest, or because a checkpoint without one is damaged.
          expect(E.isLeft(r)).toBe(true);
          if (E.isLeft(r)) expect(r.left).toBeInstanceOf(CheckpointError);
          rmSync(dir, { recursive: true, force: true });
        },
      ),
      { numRuns: 120, timeout: 5_000 },
    );
    expect(readdirSync(work)).toEqual([]);
  });
});
