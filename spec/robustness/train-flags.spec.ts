import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src/cli/args.js';
import { TRAIN_FLAG_BY_NAME, TRAIN_FLAG_TABLE, type TrainFlag } from '../../src/cli/train-flags.js';
import type { TrainConfig } from '../../src/training/config.js';

/**
 * Issue 33 item 4: one table of `rlvr train`'s flags, from which the parser sets each setting. Every row is tried
 * with a value of its kind, and must land where its row says (`sets`), or be refused naming that setting.
 */
const valueAt = (cfg: TrainConfig, target: string): unknown => {
  const [key, inner] = target.split('.') as [string, string | undefined];
  const value = (cfg as unknown as Record<string, unknown>)[key];
  return inner === undefined ? value : (value as Record<string, unknown> | null)?.[inner];
};

/**
 * The flags a flag needs beside it to be accepted: merging needs adapters, a Hub model and an output; BICC's
 * options need --bicc, --allow-over-host-memory a --memory-limit-gb; ConSPO's options need ConSPO (an objective's
 * options are checked against it).
 */
const COMPANIONS: Readonly<Record<string, readonly string[]>> = {
  'merge-lora': ['--lora-r', '4', '--model', 'M', '--output', 'O'],
  ...Object.fromEntries(['tau', 'margin', 'alpha'].map((f) => [f, ['--objective', 'conspo']])),
  // The flag a row needs, with a value when it takes one (--allow-over-host-memory needs --memory-limit-gb N).
  ...Object.fromEntries(
    TRAIN_FLAG_TABLE.filter((f) => f.needs).map((f) => {
      const needed = TRAIN_FLAG_BY_NAME.get(f.needs!)!;
      return [f.flag, [`--${f.needs}`, ...(needed.kind === 'switch' ? [] : ['1'])]];
    }),
  ),
};

function tryFlag(f: TrainFlag, text: string | null): { set: unknown; refused: string | null } {
  const argv = [...(text === null ? [`--${f.flag}`] : [`--${f.flag}`, text]), ...(COMPANIONS[f.flag] ?? [])];
  const r = parseTrainArgs(argv);
  return E.isLeft(r) ? { set: undefined, refused: r.left.field } : { set: valueAt(r.right, f.sets), refused: null };
}

describe('the table of rlvr train flags', () => {
  const parsed = parseTrainArgs([]);
  if (E.isLeft(parsed)) throw parsed.left;
  const DEFAULTS = parsed.right;

  it('has one row per flag, each setting a distinct target', () => {
    const flags = TRAIN_FLAG_TABLE.map((f) => f.flag);
    expect(new Set(flags).size).toBe(flags.length);
    const targets = TRAIN_FLAG_TABLE.map((f) => f.sets);
    expect(new Set(targets).size).toBe(targets.length);
  });

  for (const f of TRAIN_FLAG_TABLE) {
    it(`--${f.flag} (${f.kind}) sets ${f.sets}`, () => {
      if (f.kind === 'switch') {
        expect(tryFlag(f, null)).toEqual({ set: true, refused: null });
      } else if (f.kind === 'digits') {
        expect(tryFlag(f, '3')).toEqual({ set: 3, refused: null });
        expect(tryFlag(f, '1,2')).toEqual({ set: [1, 2], refused: null });
      } else if (f.kind === 'text') {
        // a free text (a path, an objective option) lands as typed; a checked one is refused naming its flag
        const { set, refused } = tryFlag(f, 'no-such-value');
        if (refused === null) expect(set).toBe('no-such-value');
        else expect(refused).toBe(`--${f.flag}`);
      } else {
        // some number other than the default is accepted and lands there
        const landed = ['3', '2', '1', '0.5', '0.25']
          .map(Number)
          .some((n) => n !== valueAt(DEFAULTS, f.sets) && tryFlag(f, String(n)).set === n);
        expect(landed, `no number reached ${f.sets}`).toBe(true);
        expect(tryFlag(f, 'abc').refused).toBe(`--${f.flag}`);
        if (f.kind === 'number-or-none') expect(tryFlag(f, 'none')).toEqual({ set: null, refused: null });
      }
    });
  }
});
