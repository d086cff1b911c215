import * as E from 'fp-ts/lib/Either.js';
import { jsonSyntaxDetail, RlvrError } from '../core/errors.js';
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

/** A dataset row, with the line of the file it came from (for messages). */
export interface DatasetProblem extends Problem {
  readonly line: number;
}

/**
 * One line of a dataset file: `{ "prompt": non-empty string, "answer": string or finite number }`, its answer one
 * the verifier can match (its own worked solution, `\boxed{answer}`, scores 1: an answer with unbalanced braces,
 * or a number JavaScript writes in exponent form, never would). Null for a blank line. Messages quote the line's
 * text (escaped) only with `quote`: false for a file reached through a link or under /proc, which is not the
 * user's data.
 */
export function parseDatasetLine(
  text: string,
  file: string,
  line: number,
  quote = true,
): E.Either<DatasetError, DatasetProblem | null> {
  const trimmed = text.trim();
  if (trimmed === '') return E.right(null);
  let row: unknown;
  try {
    row = JSON.parse(trimmed);
  } catch (e) {
    return E.left(new DatasetError(file, line, 'line', `is not JSON (${jsonSyntaxDetail(e, quote).slice(0, 200)})`));
  }
  const { prompt, answer } = (typeof row === 'object' && row !== null ? row : {}) as {
    prompt?: unknown;
    answer?: unknown;
  };
  if (typeof prompt !== 'string' || prompt === '')
    return E.left(new DatasetError(file, line, 'prompt', 'must be a non-empty string'));
  if (typeof answer !== 'string' && typeof answer !== 'number')
    return E.left(new DatasetError(file, line, 'answer', 'must be a string or a number'));
  if (typeof answer === 'number') {
    // A JSON number is read as a double: refuse what that changes (1e400 is Infinity, 12345678901234567890 loses
    // digits, 1e21 is written back as "1e+21", which no \boxed{} number matches).
    const why = !Number.isFinite(answer)
      ? 'is too large to represent'
      : Number.isInteger(answer) && !Number.isSafeInteger(answer)
        ? 'loses digits as a JSON number'
        : normalizeNumber(String(answer)) === null
          ? `is written back as ${String(answer)}, not a plain decimal`
          : null;
    if (why) return E.left(new DatasetError(file, line, 'answer', `${why}: give it as a string of digits`));
  }
  const value = String(answer);
  if (value.trim() === '') return E.left(new DatasetError(file, line, 'answer', 'is empty'));
  if (verifyBoxed(boxed(value), value) !== 1) {
    const shown = JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
    return E.left(
      new DatasetError(
        file,
        line,
        'answer',
        `${quote ? `${shown} ` : ''}cannot be matched by the \\boxed{} verifier (its own worked solution scores 0: ` +
          'braces must balance; give large or exponent-form numbers as strings of digits)',
      ),
    );
  }
  return E.right({ prompt, answer: value, line });
}

/** Parse JSONL text; the first bad line is an error naming the file, the line and the field. */
export function parseDataset(text: string, file: string): E.Either<DatasetError, DatasetProblem[]> {
  const problems: DatasetProblem[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const p = parseDatasetLine(lines[i]!, file, i + 1);
    if (E.isLeft(p)) return p;
    if (p.right) problems.push(p.right);
  }
  if (problems.length === 0) return E.left(new DatasetError(file, 0, 'file', 'has no rows'));
  return E.right(problems);
}

/** A dataset's task, with its rows and file (what the up-front checks name). */
export interface DatasetTask extends Task<Problem> {
  readonly rows: readonly Problem[];
  readonly file: string | null;
}

/** The dataset as a task. `symbols` are the characters of every prompt and answer (for a character tokenizer). */
export function datasetTask(problems: readonly Problem[], name = 'dataset', file: string | null = null): DatasetTask {
  const chars = new Set<string>(['\\boxed{', '}']);
  for (const p of problems) for (const c of p.prompt + p.answer) chars.add(c);
  return {
    rows: problems,
    file,
    name,
    symbols: [...chars],
    generatePrompt: (rng: Rng) => problems[rng.int(problems.length)]!,
    verify: (completion, problem) => verifyBoxed(completion, problem.answer),
    workedSolution: (problem) => boxed(problem.answer),
  };
}
