import * as E from 'fp-ts/lib/Either.js';
import { RlvrError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { boxed, extractBoxed, normalizeNumber } from './boxed.js';
import type { Problem, Task } from './task.js';

/**
 * A user dataset as a task: a JSON-lines file, one `{ "prompt": ..., "answer": ... }` per line (other fields are
 * ignored), rewarded by the `\boxed{}` verifier. Prompts are drawn uniformly; the held-out split is the usual
 * hash of the prompt, so evaluation prompts never appear in training.
 */
export class DatasetError extends RlvrError {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly field: string,
    detail: string,
  ) {
    super(`dataset ${file}:${line}: ${field} ${detail}`);
  }
}

/** 1 if the last `\boxed{}` of the completion is the answer: numbers compared normalised, other answers as text. */
export function verifyBoxed(completion: string, answer: string): 0 | 1 {
  const got = extractBoxed(completion);
  if (got === null) return 0;
  const [a, b] = [normalizeNumber(got), normalizeNumber(answer)];
  if (a !== null && b !== null) return a === b ? 1 : 0;
  const squash = (s: string): string => s.replace(/\s+/g, ' ').trim();
  return squash(got) === squash(answer) ? 1 : 0;
}

/** Parse JSONL text; the first bad line is an error naming the file, the line and the field. */
export function parseDataset(text: string, file: string): E.Either<DatasetError, Problem[]> {
  const problems: Problem[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '') continue;
    let row: unknown;
    try {
      row = JSON.parse(line);
    } catch (e) {
      return E.left(new DatasetError(file, i + 1, 'line', `is not JSON (${(e as Error).message})`));
    }
    const { prompt, answer } = (typeof row === 'object' && row !== null ? row : {}) as {
      prompt?: unknown;
      answer?: unknown;
    };
    if (typeof prompt !== 'string' || prompt === '')
      return E.left(new DatasetError(file, i + 1, 'prompt', 'must be a non-empty string'));
    if (typeof answer !== 'string' && typeof answer !== 'number')
      return E.left(new DatasetError(file, i + 1, 'answer', 'must be a string or a number'));
    problems.push({ prompt, answer: String(answer) });
  }
  if (problems.length === 0) return E.left(new DatasetError(file, 0, 'file', 'has no rows'));
  return E.right(problems);
}

/** The dataset as a task. `symbols` are the characters of every prompt and answer (for a character tokenizer). */
export function datasetTask(problems: readonly Problem[], name = 'dataset'): Task<Problem> {
  const chars = new Set<string>(['\\boxed{', '}']);
  for (const p of problems) for (const c of p.prompt + p.answer) chars.add(c);
  return {
    name,
    symbols: [...chars],
    generatePrompt: (rng: Rng) => problems[rng.int(problems.length)]!,
    verify: (completion, problem) => verifyBoxed(completion, problem.answer),
    workedSolution: (problem) => boxed(problem.answer),
  };
}
