/**
 * The main job's settings, chosen by the search in docs/results/addition-regime/ (its README.md says why): read by
 * `npm run example:addition` (examples/train-addition.ts) and by the browser page's default preset.
 */
import type { TrainConfig } from '../src/index.js';

export const MAIN_JOB = {
  task: 'addition',
  digits: [2, 1],
  // Supervised warm-start until greedy pass@1 on 200 training-split problems reaches 0.4 (checked every 2 steps),
  // at most 600 steps: each seed starts RL weak but not at zero, wherever its warm-start's jump happens.
  warmStartSteps: 600,
  warmStartUntil: 0.4,
  objective: 'grpo',
  steps: 300,
  learningRate: 5e-4,
  warmupSteps: 20,
  temperature: 0.7,
  promptsPerStep: 16,
  numGenerations: 8,
  evalEvery: 50,
  evalPrompts: 200,
  evalK: 4,
} as const satisfies Partial<TrainConfig>;
