import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src/cli/args.js';
import { rlvrSync, TINY_ARGS } from './helpers/cli.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * BICC's options without `--bicc` were accepted and did nothing (a run with `--bicc-sides negatives` alone was
 * plain GRPO, said nowhere), where LoRA's flags turn LoRA on. `rlvr train` now refuses each, naming it and the
 * switch it needs (exit 2); with `--bicc` each lands in the config as before.
 */
const bundle = useCliBundle('inert-flags');
const BICC_OPTIONS: readonly [string, string, string, unknown][] = [
  ['--bicc-ratio', 'conditioned-old', 'biccRatio', 'conditioned-old'],
  ['--bicc-sides', 'negatives', 'biccSides', 'negatives'],
  ['--bicc-placement', 'after-query', 'biccPlacement', 'after-query'],
  ['--bicc-context-share', '0.25', 'biccContextShare', 0.25],
];

describe('a BICC option without --bicc is refused, naming it and --bicc', () => {
  for (const [flag, text, key, value] of BICC_OPTIONS) {
    it(`${flag} ${text}: refused alone, set with --bicc`, () => {
      const alone = parseTrainArgs([flag, text, '--steps', '3']);
      expect(E.isLeft(alone) && alone.left).toMatchObject({ name: 'TrainConfigError', field: flag });
      expect(E.isLeft(alone) && alone.left.message).toMatch(new RegExp(`^train config: ${flag} = .* needs --bicc\\b`));
      const withBicc = parseTrainArgs(['--bicc', flag, text]);
      if (E.isLeft(withBicc)) throw withBicc.left;
      expect(withBicc.right).toMatchObject({ bicc: true, [key]: value });
    });
  }

  it('the CLI: exit 2 with one line, before a backend opens', () => {
    const r = rlvrSync(bundle.path, ['train', ...TINY_ARGS, '--bicc-sides', 'negatives']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim().split('\n')).toEqual([
      'rlvr train: train config: --bicc-sides = "negatives" needs --bicc (without it, it does nothing)',
    ]);
  });
});
