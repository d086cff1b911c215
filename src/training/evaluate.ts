import type { Rng } from '../core/rng.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import { sampleRollouts } from '../rl/sampler.js';
import type { Problem, Task } from '../tasks/task.js';
import type { Tokenizer } from '../tasks/tokenizer.js';

/** Held-out evaluation: pass@1 with greedy decoding, and avg@k / pass@k over k sampled completions per prompt. */
export interface EvalResult {
  /** Fraction of prompts whose greedy completion is correct. */
  readonly passAt1: number;
  /** Mean reward over k sampled completions per prompt. */
  readonly avgAtK: number;
  /** Fraction of prompts with at least one correct completion among the k. */
  readonly passAtK: number;
  readonly k: number;
  readonly prompts: number;
}

export interface EvalOptions {
  readonly k: number;
  readonly temperature: number;
  readonly topP: number;
  readonly maxNewTokens: number;
  /** Prompts per sampling batch (bounds memory). */
  readonly chunk?: number;
}

export async function evaluate<P extends Problem>(
  params: TransformerParams,
  config: TransformerConfig,
  tokenizer: Tokenizer,
  task: Task<P>,
  problems: readonly P[],
  rng: Rng,
  opts: EvalOptions,
): Promise<EvalResult> {
  const chunk = opts.chunk ?? 100;
  let greedyCorrect = 0;
  let sampledReward = 0;
  let anyCorrect = 0;
  for (let start = 0; start < problems.length; start += chunk) {
    const part = problems.slice(start, start + chunk);
    const prompts = part.map((p) => p.prompt);
    const greedy = await sampleRollouts(params, config, tokenizer, prompts, rng, {
      groupSize: 1,
      maxNewTokens: opts.maxNewTokens,
      temperature: 0,
    });
    greedy.completions.forEach((c, i) => (greedyCorrect += task.verify(c, part[i]!) > 0 ? 1 : 0));
    const sampled = await sampleRollouts(params, config, tokenizer, prompts, rng, {
      groupSize: opts.k,
      maxNewTokens: opts.maxNewTokens,
      temperature: opts.temperature,
      topP: opts.topP,
    });
    const rewards = sampled.completions.map((c, r) => task.verify(c, part[sampled.promptIndex[r]!]!));
    sampledReward += rewards.reduce((s, x) => s + x, 0);
    part.forEach((_, i) => (anyCorrect += rewards.slice(i * opts.k, (i + 1) * opts.k).some((x) => x > 0) ? 1 : 0));
  }
  const n = problems.length;
  return {
    passAt1: greedyCorrect / n,
    avgAtK: sampledReward / (n * opts.k),
    passAtK: anyCorrect / n,
    k: opts.k,
    prompts: n,
  };
}

/**
 * The run's result in one line, every number named: `held-out pass@1 (200 prompts): after warm-start 0.412, after
 * RL 0.455 (RL changed it by +0.043)`; `rl` names the RL phase (`LoRA RL (r 1)`).
 */
export function heldOutLine(prompts: number, before: number | null, after: number, rl = 'RL'): string {
  const head = `held-out pass@1 (${prompts} prompts): `;
  if (before === null) return `${head}after ${rl} ${after.toFixed(3)}`;
  const change = after - before;
  return (
    `${head}after warm-start ${before.toFixed(3)}, after ${rl} ${after.toFixed(3)} ` +
    `(${rl} changed it by ${change >= 0 ? '+' : '-'}${Math.abs(change).toFixed(3)})`
  );
}
