import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import {
  additionTask,
  CharTokenizer,
  countdownTask,
  extractBoxed,
  heldOutProblems,
  multiplicationTask,
  normalizeNumber,
  sampleProblems,
  splitOf,
  TokenizerError,
  verifyBoxedNumber,
  verifyCountdown,
  withReward,
  type Problem,
  type Task,
} from '../../src/tasks/index.js';
import { tokenizer } from './helpers/fixtures.js';

/** Write the integer n in one of many equivalent ways. */
const formatted = (n: number): fc.Arbitrary<string> =>
  fc
    .record({
      plus: fc.boolean(),
      zeros: fc.integer({ min: 0, max: 3 }),
      commas: fc.boolean(),
      decimals: fc.integer({ min: 0, max: 3 }),
      spaceIn: fc.constantFrom('', ' ', '  ', '\t', '\n'),
      spaceOut: fc.constantFrom('', ' ', ' \n '),
      dollars: fc.boolean(),
    })
    .map(({ plus, zeros, commas, decimals, spaceIn, spaceOut, dollars }) => {
      let digits = '0'.repeat(zeros) + String(Math.abs(n));
      if (commas) digits = digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
      const frac = decimals > 0 ? `.${'0'.repeat(decimals)}` : '';
      const sign = n < 0 ? '-' : plus ? '+' : '';
      const body = `${sign}${spaceIn}${digits}${frac}`;
      return `${spaceOut}${dollars ? `$${body}$` : body}${spaceOut}`;
    });

const filler = fc.string({ maxLength: 12 }).map((s) => s.replace(/[\\{}]/g, ''));

describe('verifiers', () => {
  it('accept a correct number however it is formatted, inside the last box, with any text around', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -1_000_000, max: 1_000_000 }),
        fc.integer({ min: -50, max: 50 }),
        filler,
        filler,
        (n, wrongDelta, before, after) =>
          fc.assert(
            fc.property(formatted(n), (text) => {
              const completion = `${before}\\boxed{${text}}${after}`;
              expect(verifyBoxedNumber(completion, String(n))).toBe(1);
              // An earlier, different box does not count; the last one does.
              expect(verifyBoxedNumber(`\\boxed{${n + 1}} ${completion}`, String(n))).toBe(1);
              if (wrongDelta !== 0) {
                expect(verifyBoxedNumber(completion, String(n + wrongDelta))).toBe(0);
                expect(verifyBoxedNumber(`${completion}\\boxed{${n + wrongDelta}}`, String(n))).toBe(0);
              }
            }),
            { numRuns: 5 },
          ),
      ),
      { numRuns: 150 },
    );
  });

  it('give no reward without a closed box, or for something that is not a number', () => {
    for (const c of [
      '46',
      '\\boxed{46',
      'boxed{46}',
      '\\boxed{}',
      '\\boxed{4 6x}',
      '\\boxed{--46}',
      '\\boxed{46}\\boxed{4',
      '\\boxed{1e2}',
    ]) {
      expect(verifyBoxedNumber(c, '46')).toBe(0);
    }
    expect(verifyBoxedNumber('\\boxed{-0}', '0')).toBe(1);
    expect(verifyBoxedNumber('\\boxed {46}', '46')).toBe(1);
  });

  it('extract the last box with nested braces', () => {
    expect(extractBoxed('a \\boxed{1} b \\boxed{\\frac{1}{2}} c')).toBe('\\frac{1}{2}');
    expect(extractBoxed('\\boxed{{a}{b}}')).toBe('{a}{b}');
    expect(extractBoxed('none')).toBeNull();
    expect(normalizeNumber(' +0,012.500 ')).toBe('12.5');
    expect(normalizeNumber('.5')).toBe('0.5');
    expect(normalizeNumber('-000')).toBe('0');
    expect(normalizeNumber('12a')).toBeNull();
  });

  it('check countdown expressions exactly: the given numbers once each, exact arithmetic, the target', () => {
    const p = { numbers: [3, 5, 7], target: 22 };
    expect(verifyCountdown('\\boxed{3*5+7}', p)).toBe(1);
    expect(verifyCountdown('\\boxed{7+5*3}', p)).toBe(1);
    expect(verifyCountdown('\\boxed{(7 + 5 * 3)}', p)).toBe(1);
    expect(verifyCountdown('\\boxed{3*5+7=22}', p)).toBe(1);
    expect(verifyCountdown('\\boxed{3*5+7=23}', p)).toBe(0);
    expect(verifyCountdown('\\boxed{3*5+7+0}', p)).toBe(0);
    expect(verifyCountdown('\\boxed{3*7+1}', p)).toBe(0);
    expect(verifyCountdown('\\boxed{5*5-3}', p)).toBe(0);
    expect(verifyCountdown('\\boxed{22}', p)).toBe(0);
    expect(verifyCountdown('\\boxed{3*5+7', p)).toBe(0);
    expect(verifyCountdown('\\boxed{3/(5-5)+7}', { numbers: [3, 5, 5, 7], target: 22 })).toBe(0);
    expect(verifyCountdown('\\boxed{7/2*4}', { numbers: [7, 2, 4], target: 14 })).toBe(1);
    expect(verifyCountdown('\\boxed{(3+5)*7}', { numbers: [3, 5, 7], target: 56 })).toBe(1);
  });
});

describe('tasks', () => {
  const tasks: Task<Problem>[] = [
    additionTask(),
    additionTask({ digits: 4 }),
    multiplicationTask(),
    multiplicationTask({ digits: [3, 2] }),
    countdownTask(),
    countdownTask({ count: 4 }),
  ];

  it.each(tasks.map((t) => [t.name, t] as const))(
    '%s: worked solutions get reward 1, wrong answers 0, and tokenize',
    (_, task) => {
      fc.assert(
        fc.property(fc.integer({ min: 0, max: 2 ** 31 }), (seed) => {
          const p = task.generatePrompt(new Rng(seed));
          const solution = task.workedSolution(p);
          expect(task.verify(solution, p)).toBe(1);
          expect(task.verify(`\\boxed{${Number(p.answer) + 1}}`, p)).toBe(0);
          expect(task.verify('', p)).toBe(0);
          expect(tokenizer.decode(tokenizer.encode(p.prompt + solution))).toBe(p.prompt + solution);
          expect(tokenizer.encode(solution)[0]).toBe(tokenizer.encode('\\boxed{')[0]);
        }),
        { numRuns: 100 },
      );
    },
  );

  it('generates the same problems for a seed, and a held-out set disjoint from training prompts', () => {
    const task = additionTask();
    expect(sampleProblems(task, 20, new Rng(3))).toEqual(sampleProblems(task, 20, new Rng(3)));
    const test = heldOutProblems(task, 50);
    expect(heldOutProblems(task, 50)).toEqual(test);
    const train = sampleProblems(task, 500, new Rng(9));
    const testPrompts = new Set(test.map((p) => p.prompt));
    expect(train.every((p) => !testPrompts.has(p.prompt) && splitOf(p.prompt) === 'train')).toBe(true);
    expect(test.every((p) => splitOf(p.prompt) === 'test')).toBe(true);
  });

  it('lets a user plug in their own reward function', () => {
    const task = withReward(additionTask(), (completion, p) => (completion.includes(p.answer) ? 0.5 : -1));
    const p = task.generatePrompt(new Rng(1));
    expect(task.verify(`it is ${p.answer}`, p)).toBe(0.5);
    expect(task.verify('no idea', p)).toBe(-1);
    expect(task.workedSolution(p)).toBe(additionTask().workedSolution(p));
  });
});

describe('character tokenizer', () => {
  it('round-trips, matches multi-character symbols first, and reserves PAD/BOS/EOS', () => {
    const tok = new CharTokenizer(['a', 'b', 'ab', '\\boxed{', '}', '\\']);
    expect([tok.pad, tok.bos, tok.eos]).toEqual([0, 1, 2]);
    expect(tok.vocabSize).toBe(9);
    expect(tok.encode('abab')).toEqual([5, 5]);
    expect(tok.encode('\\boxed{a}\\')).toEqual([6, 3, 7, 8]);
    expect(tok.decode([1, 5, 3, 2, 0])).toBe('aba');
    expect(tok.decode([1, 3, 2], { keepSpecial: true })).toBe('<bos>a<eos>');
    expect(() => tok.encode('abc')).toThrow(TokenizerError);
    expect(() => new CharTokenizer(['a', 'a'])).toThrow(TokenizerError);
  });

  it('encodes any text as the longest symbol at each position', () => {
    const symbols = ['a', 'b', 'ab', 'abc', 'c', '\\boxed{', '\\', '}', 'x', 'xy', 'y'];
    const tok = new CharTokenizer(symbols);
    const longest = (text: string): number[] => {
      const out: number[] = [];
      for (let i = 0; i < text.length; ) {
        const s = symbols.filter((x) => text.startsWith(x, i)).sort((x, y) => y.length - x.length)[0]!;
        out.push(3 + symbols.indexOf(s));
        i += s.length;
      }
      return out;
    };
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...symbols), { maxLength: 12 }), (pieces) => {
        const text = pieces.join('');
        expect(tok.encode(text)).toEqual(longest(text));
      }),
    );
  });
});
