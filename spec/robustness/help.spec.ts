import { describe, expect, it } from 'vitest';
import { TRAIN_FLAGS, TRAIN_USAGE } from '../../src/cli/args.js';
import { TRAIN_DEFAULTS as D } from '../../src/training/config.js';

/**
 * `rlvr train --help` as a new user reads it: no control bytes (a "\b" in a string printed a
 * backspace: "rows verified by oxed{}"), every option on its own line with words and its default, descriptions in
 * one column.
 */
const optionLines = TRAIN_USAGE.split('\n').filter((l) => /^ {2}--/.test(l));

describe('the help text', () => {
  it('has no control characters, and spells \\boxed{}', () => {
    const control = [...TRAIN_USAGE].filter((c) => {
      const code = c.charCodeAt(0);
      return (code < 0x20 && c !== '\n') || code === 0x7f;
    });
    expect(control).toEqual([]);
    expect(TRAIN_USAGE).toContain('\\boxed{}');
  });

  it('lists every flag the parser takes exactly once, each on its own line', () => {
    for (const flag of TRAIN_FLAGS) {
      const lines = optionLines.filter((l) => new RegExp(`^ {2}--${flag}(\\s|$)`).test(l));
      expect(lines, `--${flag}`).toHaveLength(1);
    }
    expect(optionLines.length).toBe(TRAIN_FLAGS.length);
  });

  it('gives every option words and a default (the objective options included)', () => {
    for (const line of optionLines) {
      const words = line.slice(33);
      expect(words.length, line).toBeGreaterThan(10);
      expect(line, line).toMatch(/default|off unless given|\bset\b/);
    }
    // The defaults the help states are the config's, which are the main job's.
    for (const [flag, def] of [
      ['warm-start-steps', '600'],
      ['warm-start-until', '0.4'],
      ['steps', '300'],
      ['learning-rate', '0.0005'],
      ['temperature', '0.7'],
      ['eval-every', '50'],
      ['digits', '2,1'],
      ['objective', 'grpo'],
      ['d-model', '64'],
      ['n-layers', '2'],
      ['n-heads', '4'],
      ['warm-start-learning-rate', '0.003'],
    ] as const)
      expect(optionLines.find((l) => l.startsWith(`  --${flag} `))).toMatch(new RegExp(`default ${def}\\b`));
    expect([D.warmStartSteps, D.warmStartUntil, D.steps, D.learningRate, D.temperature, D.evalEvery]).toEqual([
      600, 0.4, 300, 5e-4, 0.7, 50,
    ]);
    // A note about another value than the default follows a semicolon; one about the default, a colon.
    expect(optionLines.find((l) => l.startsWith('  --eval-every '))).toMatch(/\(default 50; 0: only before and after/);
    expect(optionLines.find((l) => l.startsWith('  --warm-start-until '))).toMatch(/\(default 0\.4; none: /);
    expect(optionLines.find((l) => l.startsWith('  --checkpoint-every '))).toMatch(/\(default 0: at the end only\)/);
  });

  it('aligns every description in one column; continuation lines start there too', () => {
    for (const line of optionLines) {
      expect(line[32], line).toBe(' ');
      expect(line[33], line).toMatch(/\S/);
      expect(line.slice(2, 32), line).toMatch(/^--\S+( \S+)? *$/);
    }
    const indented = TRAIN_USAGE.split('\n').filter(
      (l) => /^ /.test(l) && !/^ {2}--/.test(l) && !/^ {2}\d {2}/.test(l),
    );
    expect(indented.length).toBeGreaterThan(0);
    for (const line of indented) expect(line, line).toMatch(/^ {33}\S/);
  });
});
