/**
 * The built-in tasks by name: what `TrainConfig.task`, the CLI's `--task` and the page offer, and how the trainer
 * builds one from the config's `digits`. A new task is its own file and one line here.
 */
import { additionTask, multiplicationTask } from './arithmetic.js';
import { countdownTask } from './countdown.js';
import type { Problem, Task } from './task.js';

/** Digits of both operands, or of the first and the second (arithmetic tasks; others ignore them). */
export type Digits = number | readonly [number, number];

export interface TaskEntry {
  /** One line for usage texts. */
  readonly help: string;
  /** The task, with `digits` when given (null: the task's default). */
  readonly make: (digits: Digits | null) => Task<Problem>;
}

export const TASKS = {
  addition: {
    help: 'a+b=, boxed sum (--digits N, or A,B: first and second)',
    make: (digits) => additionTask(digits === null ? {} : { digits }),
  },
  multiplication: {
    help: 'a*b=, boxed product (--digits A,B; N: N digits by 1)',
    make: (digits) =>
      multiplicationTask(digits === null ? {} : { digits: typeof digits === 'number' ? [digits, 1] : digits }),
  },
  countdown: { help: 'reach a target with + - * / over given numbers', make: () => countdownTask() },
} as const satisfies Readonly<Record<string, TaskEntry>>;

export type TaskName = keyof typeof TASKS;
export const TASK_NAMES = Object.keys(TASKS) as readonly TaskName[];
