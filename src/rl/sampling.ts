import type { Rng } from '../core/rng.js';
import { chooseToken } from '../core/sampling.js';

/**
 * Choosing one token from a row of log-probs on the host: greedy, or temperature sampling (the temperature is
 * already in the log-probs) restricted to the top-p nucleus (`chooseToken` in core/sampling.ts, which the
 * `sampleTokens` kernels follow). Exactly one uniform draw per sampled token and none when greedy, so a seeded
 * run is reproducible and two samplers that see the same log-probs pick the same tokens.
 */
export function pickToken(
  logProbs: ArrayLike<number>,
  offset: number,
  vocab: number,
  rng: Rng,
  greedy: boolean,
  topP: number,
): number {
  return chooseToken(logProbs, offset, vocab, greedy ? 0 : rng.uniform(), greedy, topP);
}
