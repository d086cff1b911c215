/** Tasks with verifiable rewards, the answer extractor, and the tokenizer interface with its character implementation. */
import { CharTokenizer } from './tokenizer.js';
import type { Problem, Task } from './task.js';

export { CharTokenizer, TokenizerError, type Tokenizer } from './tokenizer.js';
export { TASKS, TASK_NAMES, type TaskName, type TaskEntry, type Digits } from './registry.js';
export { DatasetError, datasetTask, parseDataset, verifyBoxed } from './dataset.js';
export { extractBoxed, normalizeNumber, verifyBoxedNumber, boxed } from './boxed.js';
export {
  type Problem,
  type Task,
  type RewardFn,
  type Split,
  splitOf,
  generateFrom,
  sampleProblems,
  heldOutProblems,
  withReward,
  defineTask,
  randomDigits,
  ARITHMETIC_SYMBOLS,
} from './task.js';
export { additionTask, multiplicationTask, type ArithmeticProblem, type ArithmeticOptions } from './arithmetic.js';
export {
  countdownTask,
  verifyCountdown,
  evaluate as evaluateExpression,
  type CountdownProblem,
  type CountdownOptions,
} from './countdown.js';

/** A character tokenizer covering every symbol the given tasks use (in first-seen order, so ids are stable). */
export function tokenizerFor(...tasks: readonly Task<Problem>[]): CharTokenizer {
  const symbols: string[] = [];
  for (const t of tasks) for (const s of t.symbols) if (!symbols.includes(s)) symbols.push(s);
  return new CharTokenizer(symbols);
}
