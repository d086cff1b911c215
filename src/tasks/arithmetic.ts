import { ArgumentError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { boxed, verifyBoxedNumber } from './boxed.js';
import { ARITHMETIC_SYMBOLS, randomDigits, type Problem, type Task } from './task.js';

/** `a+b=` and `a*b=`: the completion is `\boxed{result}` (a compact format a tiny character model can learn). */
export interface ArithmeticProblem extends Problem {
  readonly a: number;
  readonly b: number;
}

export interface ArithmeticOptions {
  /** Digits of each operand (default 2 for addition, [2, 1] for multiplication). */
  readonly digits?: number | readonly [number, number];
}

function digitsOf(opts: ArithmeticOptions, fallback: readonly [number, number]): [number, number] {
  const d = opts.digits ?? fallback;
  const [da, db] = typeof d === 'number' ? [d, d] : d;
  for (const n of [da, db])
    if (!Number.isInteger(n) || n < 1 || n > 7)
      throw new ArgumentError('arithmetic task', `digits must be 1..7, got ${n}`);
  return [da, db];
}

function arithmeticTask(
  name: string,
  op: '+' | '*',
  f: (a: number, b: number) => number,
  opts: ArithmeticOptions,
  fallback: readonly [number, number],
): Task<ArithmeticProblem> {
  const [da, db] = digitsOf(opts, fallback);
  return {
    name,
    symbols: ARITHMETIC_SYMBOLS,
    generatePrompt(rng: Rng): ArithmeticProblem {
      const a = randomDigits(rng, da);
      const b = randomDigits(rng, db);
      return { prompt: `${a}${op}${b}=`, answer: String(f(a, b)), a, b };
    },
    verify: (completion, problem) => verifyBoxedNumber(completion, problem.answer),
    workedSolution: (problem) => boxed(problem.answer),
  };
}

/** Multi-digit addition: `12+34=` -> `\boxed{46}`. */
export const additionTask = (opts: ArithmeticOptions = {}): Task<ArithmeticProblem> =>
  arithmeticTask('addition', '+', (a, b) => a + b, opts, [2, 2]);

/** Multi-digit multiplication: `12*3=` -> `\boxed{36}`. */
export const multiplicationTask = (opts: ArithmeticOptions = {}): Task<ArithmeticProblem> =>
  arithmeticTask('multiplication', '*', (a, b) => a * b, opts, [2, 1]);
