import { describe, expect, it } from 'vitest';
import { FieldError, quoteValue } from '../../src/core/errors.js';
import { ConfigError } from '../../src/objectives/errors.js';
import { BiccError } from '../../src/rl/bicc-options.js';
import { TrainConfigError } from '../../src/training/config.js';

/** Issue 33 item 4: the three config errors share one base and one way of quoting a value. */
describe('FieldError and quoteValue', () => {
  it('quotes strings and records as JSON, numbers as themselves, and never throws', () => {
    expect(quoteValue('grpo')).toBe('"grpo"');
    expect(quoteValue([1, 2])).toBe('[1,2]');
    expect(quoteValue({ r: 8 })).toBe('{"r":8}');
    expect([quoteValue(0.5), quoteValue(Number.NaN), quoteValue(-Infinity)]).toEqual(['0.5', 'NaN', '-Infinity']);
    expect([quoteValue(true), quoteValue(null), quoteValue(undefined), quoteValue(3n)]).toEqual([
      'true',
      'null',
      'undefined',
      '3',
    ]);
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(quoteValue(cycle)).toBe('[object Object]');
    expect(quoteValue({ n: 1n })).toBe('[object Object]');
    const bare = Object.create(null) as Record<string, unknown>;
    bare.self = bare;
    expect(quoteValue(bare)).toMatch(/no text form/);
  });

  it('quotes a bounded prefix of a long value', () => {
    expect(quoteValue('x'.repeat(100_000))).toMatch(/^"x{79}\.\.\. \(100002 characters\)$/);
  });

  it('is the base of the trainer, objective and BICC config errors, whose messages keep their forms', () => {
    const errors = [
      new TrainConfigError('steps', -1, 'must be >= 0'),
      new ConfigError('grpo', 'epsilon', 2, 'must be in (0, 1)'),
      new BiccError('placement', 'middle', 'must be one of after-query, before-query'),
    ];
    for (const e of errors) expect(e).toBeInstanceOf(FieldError);
    expect(errors.map((e) => [e.name, e.field, e.value, e.reason])).toEqual([
      ['TrainConfigError', 'steps', -1, 'must be >= 0'],
      ['ConfigError', 'epsilon', 2, 'must be in (0, 1)'],
      ['BiccError', 'placement', 'middle', 'must be one of after-query, before-query'],
    ]);
    expect(errors.map((e) => e.message)).toEqual([
      'train config: steps = -1 must be >= 0',
      'grpo config: epsilon = 2: must be in (0, 1)',
      'bicc: placement = "middle": must be one of after-query, before-query',
    ]);
    // the trainer's error names a flag alone when there is no value to quote
    expect(new TrainConfigError('--steps', null, 'needs a value').message).toBe('train config: --steps needs a value');
  });
});
