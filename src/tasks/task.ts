import { ArgumentError } from '../core/errors.js';
import { Rng } from '../core/rng.js';

/** One problem instance. `prompt` is the text after BOS; `answer` the canonical final answer. */
export interface Problem {
  readonly prompt: string;
  readonly answer: string;
}

/** A reward for a completion (the text the policy generated after the prompt, EOS excluded). */
export type RewardFn<P extends Problem = Problem> = (completion: string, problem: P) => number;

/**
 * A task with a verifiable reward. The built-in tasks return binary rewards (0 or 1); a custom task may return
 * any finite number. `symbols` lists what prompts and completions are made of, so a character tokenizer can be
 * built for a task or a mixture of tasks.
 */
export interface Task<P extends Problem = Problem> {
  readonly name: string;
  readonly symbols: readonly string[];
  generatePrompt(rng: Rng): P;
  /** The reward of a completion (method syntax, so a Task<SpecificProblem> is usable as a Task<Problem>). */
  verify(completion: string, problem: P): number;
  /** A correct completion, for the supervised warm-start; it ends in `\boxed{answer}`. */
  workedSolution(problem: P): string;
}

export type Split = 'train' | 'test';

/** FNV-1a over the prompt: a stable, seed-independent hash, so the same prompt is always in the same split. */
function hashPrompt(prompt: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < prompt.length; i++) h = Math.imul(h ^ prompt.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

/** Which split a prompt belongs to: a fixed fraction of all prompts (by hash) is held out for evaluation. */
export function splitOf(prompt: string, testFraction = 0.1): Split {
  return hashPrompt(prompt) / 4294967296 < testFraction ? 'test' : 'train';
}

/**
 * A problem from one split, by rejection: held-out prompts never appear in training. Throws after many misses
 * (a task whose prompt space is too small for the fraction).
 */
export function generateFrom<P extends Problem>(task: Task<P>, rng: Rng, split: Split, testFraction = 0.1): P {
  for (let tries = 0; tries < 10_000; tries++) {
    const p = task.generatePrompt(rng);
    if (splitOf(p.prompt, testFraction) === split) return p;
  }
  throw new ArgumentError('generateFrom', `task ${task.name} produced no ${split} prompt in 10000 tries`);
}

/** `n` training problems drawn with `rng`. */
export function sampleProblems<P extends Problem>(task: Task<P>, n: number, rng: Rng, testFraction = 0.1): P[] {
  return Array.from({ length: n }, () => generateFrom(task, rng, 'train', testFraction));
}

/** A fixed held-out evaluation set: the same `n` problems for the same seed, disjoint from training prompts. */
export function heldOutProblems<P extends Problem>(task: Task<P>, n: number, seed = 1234, testFraction = 0.1): P[] {
  const rng = new Rng(seed);
  return Array.from({ length: n }, () => generateFrom(task, rng, 'test', testFraction));
}

/** The task with its reward replaced by a user's function (its prompts and worked solutions unchanged). */
export function withReward<P extends Problem>(
  task: Task<P>,
  reward: RewardFn<P>,
  name = `${task.name}+custom`,
): Task<P> {
  return {
    name,
    symbols: task.symbols,
    generatePrompt: (rng) => task.generatePrompt(rng),
    verify: reward,
    workedSolution: (p) => task.workedSolution(p),
  };
}

/** A user task from its parts; the reward function is the verifier. */
export function defineTask<P extends Problem>(spec: Task<P>): Task<P> {
  return { ...spec };
}

/** A random integer with exactly `digits` digits (1-digit numbers include 0). */
export function randomDigits(rng: Rng, digits: number): number {
  if (digits === 1) return rng.int(10);
  const lo = 10 ** (digits - 1);
  return lo + rng.int(9 * lo);
}

/** The characters of arithmetic prompts and boxed answers, with `\boxed{` as one symbol. */
export const ARITHMETIC_SYMBOLS: readonly string[] = [
  '0',
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '+',
  '-',
  '*',
  '/',
  '=',
  '(',
  ')',
  ',',
  ':',
  '\\boxed{',
  '}',
];
