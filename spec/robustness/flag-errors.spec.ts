import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { parseTrainArgs } from '../../src/cli/args.js';
import { TRAIN_FLAG_TABLE } from '../../src/cli/train-flags.js';
import type { TrainConfigError } from '../../src/training/config.js';
import { rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';
import { useCliBundle } from './helpers/harness.js';

/**
 * A command line's errors name the flags the user typed, not the library's fields: `memoryLimitGb = -1`,
 * `lora.r = 0`, `biccSides = "positive"` are `--memory-limit-gb`, `--lora-r`, `--bicc-sides`; the settings a
 * reason points to are flags too (`needs --model`, not `needs modelDir`); `--adapter` with `--lora-r` is one
 * readable line, not a truncated JSON object of the LoRA record.
 */
const bundle = useCliBundle('flag-errors');

function refusal(argv: string[]): TrainConfigError {
  const r = parseTrainArgs(argv);
  if (E.isRight(r)) throw new Error(`accepted: ${argv.join(' ')}`);
  expect(r.left.message.split('\n')).toHaveLength(1);
  return r.left;
}

/** A library field name in a message: the key itself, not as the tail of a flag (`seed` in `--seed`). */
const namesField = (message: string, field: string): boolean =>
  new RegExp(`(^|[^-\\w])${field.replace(/\./g, '\\.')}\\b`).test(message);

describe('a config error on the command line names the flag typed', () => {
  const cases: [string[], string, string][] = [
    [['--memory-limit-gb', '-1'], '--memory-limit-gb', 'memoryLimitGb'],
    [['--lora-r', '0'], '--lora-r', 'lora.r'],
    [['--bicc', '--bicc-sides', 'positive'], '--bicc-sides', 'biccSides'],
    [['--d-model', '0'], '--d-model', 'model.dModel'],
    [['--lora-target-modules', 'lm_head'], '--lora-target-modules', 'lora.targetModules'],
    [['--epsilon', '-1'], '--epsilon', 'objective.epsilon'],
    [['--save-dtype', 'bf16'], '--save-dtype', 'saveDtype'],
    [['--merge-lora'], '--merge-lora', 'mergeLora'],
  ];
  for (const [argv, flag, field] of cases)
    it(`${argv.join(' ')}: ${flag}, not ${field}`, () => {
      const e = refusal(argv);
      expect(e.field).toBe(flag);
      expect(e.message.startsWith(`train config: ${flag}`)).toBe(true);
      expect(namesField(e.message, field), e.message).toBe(false);
    });

  it('the settings a reason points to are named by their flags', () => {
    expect(refusal(['--adapter', 'A']).message).toMatch(/ needs --model, the base/);
    expect(refusal(['--save-dtype', 'bf16']).message).toMatch(/only a run from --model writes$/);
    expect(refusal(['--save-dtype', 'bf16', '--model', 'M']).message).toMatch(/it needs --output$/);
    expect(refusal(['--merge-lora']).message).toMatch(/needs LoRA adapters: --lora-r or --adapter$/);
    expect(refusal(['--adapter', 'A', '--model', 'M', '--resume', 'R']).message).toMatch(/ with --resume, whose/);
    for (const argv of [
      ['--adapter', 'A'],
      ['--merge-lora', '--lora-r', '4', '--model', 'M'],
    ])
      expect(refusal(argv).message).not.toMatch(/modelDir|outputDir|mergeLora|\blora or adapter\b/);
  });

  it('--adapter with --lora-r: one readable line naming both flags, no JSON of the LoRA record', () => {
    const e = refusal(['--adapter', 'A', '--model', 'M', '--lora-r', '4']);
    expect(e.message).toBe(
      'train config: --lora-r = 4 is given with --adapter, whose adapter_config.json says how it was made',
    );
  });

  it('every number flag refused for a value out of its range is named by its flag, never by its field', () => {
    const companions: Readonly<Record<string, string[]>> = {
      'bicc-context-share': ['--bicc'],
      tau: ['--objective', 'conspo'],
      margin: ['--objective', 'conspo'],
      alpha: ['--objective', 'conspo'],
    };
    let refused = 0;
    for (const f of TRAIN_FLAG_TABLE.filter((row) => row.kind === 'number'))
      for (const text of ['-1', '1e12', '0.5']) {
        const r = parseTrainArgs([`--${f.flag}`, text, ...(companions[f.flag] ?? [])]);
        if (E.isRight(r)) continue;
        refused++;
        expect([f.flag, r.left.field]).toEqual([f.flag, `--${f.flag}`]);
        expect(namesField(r.left.message, f.sets), r.left.message).toBe(false);
      }
    expect(refused).toBeGreaterThan(30);
  });

  it('the CLI: an error found once the run began (prompt plus completion past the context) names its flag', () => {
    const r = rlvrSync(bundle.path, ['train', ...withArgs(TINY_ARGS, { '--max-completion-length': '100' })]);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^rlvr: train config: --max-completion-length = 100 plus the longest prompt/),
    ]);
  });

  it('the CLI: an objective option its objective refuses is refused before a backend opens', () => {
    const r = rlvrSync(bundle.path, ['train', ...TINY_ARGS, '--epsilon', '-1']);
    expect(r.status).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trim()).toBe('rlvr train: train config: --epsilon = -1 must be in (0, 1) for conspo');
  });
});
