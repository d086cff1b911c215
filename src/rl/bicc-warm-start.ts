/**
 * The context-reading warm-start. BICC scores a rollout after its group's opposite-class rollouts,
 * inserted before the query; a policy trained only on plain prompts has never seen such a prefix, and under it
 * scores completions as another distribution (at the first BICC step, 8.5 to 11.5 nats per token from the plain
 * prompt's log-probs on the addition task: docs/results/reading.md). Here a share of the supervised examples get
 * that prefix, built by BICC's own `insertTraces` (its layout, separators and budget), so the policy learns to solve
 * the query whatever precedes it; the target is always the worked solution.
 *
 * Each such example stands for one row of a simulated group of G rollouts: with probability 1/2 a positive row,
 * whose context is its group's negatives (near misses: the worked solution with one or two digits changed, as a
 * policy's wrong samples mostly are), otherwise a negative row, whose context is its group's positives (the worked
 * solution). The opposite class holds 1 to G - 1 rollouts, uniformly.
 */
import type { Rng } from '../core/rng.js';
import type { TransformerConfig } from '../nn/transformer.js';
import type { Problem, Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';
import { encodeCompletion, type SequenceBatch } from './batch.js';
import { traceContent } from './bicc-layout.js';
import type { BiccOptions } from './bicc-options.js';
import { insertTraces } from './bicc.js';
import { sftBatch, sftExamples } from './sft.js';

export interface ContextWarmStartOptions {
  /** Share of the examples that get an inserted context, in [0, 1] (0: the plain warm-start's batch). */
  readonly share: number;
  /** G of the simulated group: an inserted context holds 1 to G - 1 traces. */
  readonly groupSize: number;
  /** BICC's layout options (contextShare, placement, separator), as the RL step will use them. */
  readonly bicc: Partial<BiccOptions>;
}

/** Tries at a near miss that the verifier rejects before falling back to another problem's solution. */
const NEAR_MISS_TRIES = 8;

/**
 * The warm-start's batch for these problems: `sftBatch` of their worked solutions, with BICC-style context
 * inserted before the query of about `share` of them. Draws from `rng` only when share > 0, so a plain warm-start's
 * random stream is unchanged.
 */
export function contextWarmStartBatch<P extends Problem>(
  task: Task<P>,
  problems: readonly P[],
  tokenizer: Tokenizer,
  config: Pick<TransformerConfig, 'maxSeqLen' | 'vocabSize'>,
  rng: Rng,
  opts: ContextWarmStartOptions,
): SequenceBatch {
  const plain = sftBatch(tokenizer, sftExamples(task, problems));
  if (opts.share <= 0) return plain;
  const traces = problems.map((p, i) => {
    if (rng.uniform() >= opts.share) return [];
    const count = 1 + rng.int(Math.max(1, opts.groupSize - 1));
    const positiveRow = rng.uniform() < 0.5;
    const texts = Array.from({ length: count }, () =>
      positiveRow ? nearMiss(task, p, problems, i, rng) : task.workedSolution(p),
    );
    return texts.map((t) => traceContent(encodeCompletion(tokenizer, t), tokenizer.eos));
  });
  return insertTraces(plain, traces, tokenizer, config, opts.bicc).batch;
}

/**
 * A wrong solution close to the right one: the worked solution with one digit (a third of the time two) replaced
 * by another digit, kept only if the task's verifier rejects it; failing that, another problem's solution that it
 * rejects, or the last candidate.
 */
export function nearMiss<P extends Problem>(
  task: Task<P>,
  problem: P,
  others: readonly P[],
  self: number,
  rng: Rng,
): string {
  const right = task.workedSolution(problem);
  const digits = [...right].flatMap((ch, i) => (ch >= '0' && ch <= '9' ? [i] : []));
  const wrong = (s: string): boolean => task.verify(s, problem) <= 0.5;
  if (digits.length > 0) {
    for (let t = 0; t < NEAR_MISS_TRIES; t++) {
      const chars = [...right];
      const changes = rng.uniform() < 1 / 3 ? 2 : 1;
      for (let k = 0; k < changes; k++) {
        const at = digits[rng.int(digits.length)]!;
        const was = Number(chars[at]);
        chars[at] = String((was + 1 + rng.int(9)) % 10);
      }
      const s = chars.join('');
      if (wrong(s)) return s;
    }
  }
  let last = right;
  for (let t = 0; t < NEAR_MISS_TRIES && others.length > 1; t++) {
    const j = rng.int(others.length);
    if (j === self) continue;
    last = task.workedSolution(others[j]!);
    if (wrong(last)) return last;
  }
  return last;
}
