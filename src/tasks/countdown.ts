import { ArgumentError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { boxed, extractBoxed, normalizeNumber } from './boxed.js';
import { ARITHMETIC_SYMBOLS, type Problem, type Task } from './task.js';

/**
 * Countdown: reach a target with the given numbers, each used exactly once, with + - * / and parentheses.
 * Prompt `3,5,7:22=`, completion `\boxed{3*5+7}`. The verifier parses and evaluates the boxed expression in
 * exact rational arithmetic (so `7/2*2` is 7, and a division by zero is simply wrong).
 */
export interface CountdownProblem extends Problem {
  readonly numbers: readonly number[];
  readonly target: number;
  /** One expression that reaches the target (the generator's construction). */
  readonly solution: string;
}

export interface CountdownOptions {
  /** How many numbers (default 3). */
  readonly count?: number;
  /** Numbers are drawn from 1..maxNumber (default 9). */
  readonly maxNumber?: number;
  /** Targets lie in 1..maxTarget (default 99). */
  readonly maxTarget?: number;
}

type Op = '+' | '-' | '*' | '/';
const PREC: Record<Op, number> = { '+': 1, '-': 1, '*': 2, '/': 2 };

export function countdownTask(opts: CountdownOptions = {}): Task<CountdownProblem> {
  const count = opts.count ?? 3;
  const maxNumber = opts.maxNumber ?? 9;
  const maxTarget = opts.maxTarget ?? 99;
  if (!(count >= 2 && count <= 6 && maxNumber >= 2 && maxTarget >= 1))
    throw new ArgumentError('countdownTask', 'need 2..6 numbers, maxNumber >= 2, maxTarget >= 1');
  return {
    name: 'countdown',
    symbols: ARITHMETIC_SYMBOLS,
    generatePrompt(rng: Rng): CountdownProblem {
      for (;;) {
        const numbers = Array.from({ length: count }, () => 1 + rng.int(maxNumber));
        const built = randomChain(numbers, rng);
        if (built && built.value >= 1 && built.value <= maxTarget) {
          const target = built.value;
          return {
            prompt: `${numbers.join(',')}:${target}=`,
            answer: String(target),
            numbers,
            target,
            solution: built.text,
          };
        }
      }
    },
    verify: (completion, problem) => verifyCountdown(completion, problem),
    workedSolution: (problem) => boxed(problem.solution),
  };
}

/** ((n0 op n1) op n2) ... over a random order of the numbers, with only exact divisions; null if none applied. */
function randomChain(numbers: readonly number[], rng: Rng): { value: number; text: string } | null {
  const order = [...numbers];
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  let value = order[0]!;
  let text = String(value);
  let prev: Op | null = null;
  for (const x of order.slice(1)) {
    const ops: Op[] = ['+', '-', '*'];
    if (value % x === 0) ops.push('/');
    const op = ops[rng.int(ops.length)]!;
    value = op === '+' ? value + x : op === '-' ? value - x : op === '*' ? value * x : value / x;
    if (prev && PREC[prev] < PREC[op]) text = `(${text})`;
    text = `${text}${op}${x}`;
    prev = op;
  }
  return Number.isInteger(value) ? { value, text } : null;
}

/** 1 if the boxed expression uses exactly the given numbers and equals the target (an `=target` suffix is allowed). */
export function verifyCountdown(completion: string, problem: Pick<CountdownProblem, 'numbers' | 'target'>): 0 | 1 {
  const boxedText = extractBoxed(completion);
  if (boxedText === null) return 0;
  const [expr, ...rest] = boxedText.replace(/\s+/g, '').split('=');
  if (rest.length > 1 || (rest.length === 1 && normalizeNumber(rest[0]!) !== String(problem.target))) return 0;
  const parsed = evaluate(expr ?? '');
  if (parsed?.value.d !== 1 || parsed.value.n !== problem.target) return 0;
  const used = [...parsed.numbers].sort((a, b) => a - b);
  const given = [...problem.numbers].sort((a, b) => a - b);
  return used.length === given.length && used.every((n, i) => n === given[i]) ? 1 : 0;
}

interface Rational {
  readonly n: number;
  readonly d: number;
}

const gcd = (a: number, b: number): number => (b === 0 ? Math.abs(a) : gcd(b, a % b));
function rational(n: number, d: number): Rational | null {
  if (d === 0 || !Number.isSafeInteger(n) || !Number.isSafeInteger(d)) return null;
  const g = gcd(n, d) * Math.sign(d);
  return { n: n / g + 0, d: d / g };
}
function apply(op: Op, a: Rational, b: Rational): Rational | null {
  switch (op) {
    case '+':
      return rational(a.n * b.d + b.n * a.d, a.d * b.d);
    case '-':
      return rational(a.n * b.d - b.n * a.d, a.d * b.d);
    case '*':
      return rational(a.n * b.n, a.d * b.d);
    case '/':
      return rational(a.n * b.d, a.d * b.n);
  }
}

/** Recursive descent over expr := term (+|- term)*, term := factor (*|/ factor)*, factor := int | ( expr ). */
export function evaluate(src: string): { value: Rational; numbers: number[] } | null {
  let i = 0;
  const numbers: number[] = [];
  const factor = (): Rational | null => {
    if (src[i] === '(') {
      i++;
      const v = expr();
      if (v === null || src[i] !== ')') return null;
      i++;
      return v;
    }
    const m = /^\d+/.exec(src.slice(i));
    if (!m) return null;
    i += m[0].length;
    const n = Number(m[0]);
    numbers.push(n);
    return rational(n, 1);
  };
  const chain = (next: () => Rational | null, ops: string): Rational | null => {
    let v = next();
    while (v !== null && i < src.length && ops.includes(src[i]!)) {
      const op = src[i++] as Op;
      const w = next();
      v = w === null ? null : apply(op, v, w);
    }
    return v;
  };
  const term = (): Rational | null => chain(factor, '*/');
  const expr = (): Rational | null => chain(term, '+-');
  const value = expr();
  return value !== null && i === src.length ? { value, numbers } : null;
}
