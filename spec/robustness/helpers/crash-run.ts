import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { additionTask, withReward } from '../../../src/tasks/index.js';
import type { TrainConfig } from '../../../src/training/config.js';
import { tinyRun } from '../../training/helpers/tiny-run.js';

/**
 * The run the crash-safety spec interrupts: every phase (warm-start, evaluation, RL with a KL reference), a
 * checkpoint after every step, small enough that a child process finishes in about a second.
 */
export const task = withReward(additionTask(), (completion) => completion.length % 2);

export function crashConfig(outputDir: string, resume: string | null): TrainConfig {
  return tinyRun({
    warmStartSteps: 2,
    seed: 5,
    objective: 'grpo',
    objectiveOptions: { beta: 0.04 },
    checkpointEvery: 1,
    outputDir,
    resume,
  });
}

const TIMING = new Set(['seconds', 'sample_seconds', 'tokens_per_s']);

/** metrics.jsonl without the wall-clock fields: what must be identical between two runs. */
export function metricLines(dir: string): string[] {
  return readFileSync(join(dir, 'metrics.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) =>
      JSON.stringify(
        Object.fromEntries(Object.entries(JSON.parse(l) as Record<string, unknown>).filter(([k]) => !TIMING.has(k))),
      ),
    );
}
