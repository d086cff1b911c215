import type { Rng } from '../core/rng.js';

/**
 * Choosing one token from a row of log-probs on the host: greedy, or temperature sampling (the temperature is
 * already in the log-probs) restricted to the top-p nucleus. Exactly one uniform draw per sampled token, so a
 * seeded run is reproducible and two samplers that see the same log-probs pick the same tokens.
 */
export function pickToken(
  logProbs: ArrayLike<number>,
  offset: number,
  vocab: number,
  rng: Rng,
  greedy: boolean,
  topP: number,
): number {
  if (greedy) {
    let best = 0;
    for (let i = 1; i < vocab; i++) if (logProbs[offset + i]! > logProbs[offset + best]!) best = i;
    return best;
  }
  const probs = new Float64Array(vocab);
  for (let i = 0; i < vocab; i++) probs[i] = Math.exp(logProbs[offset + i]!);
  const order = Array.from({ length: vocab }, (_, i) => i);
  let kept = vocab;
  if (topP < 1) {
    // The smallest set of most likely tokens whose mass reaches topP (ties broken by id, for determinism).
    order.sort((a, b) => probs[b]! - probs[a]! || a - b);
    const total = probs.reduce((s, p) => s + p, 0);
    let mass = 0;
    kept = 0;
    while (kept < vocab && (kept === 0 || mass < topP * total)) mass += probs[order[kept++]!]!;
  }
  let mass = 0;
  for (let k = 0; k < kept; k++) mass += probs[order[k]!]!;
  const u = rng.uniform() * mass;
  let cum = 0;
  for (let k = 0; k < kept; k++) {
    cum += probs[order[k]!]!;
    if (cum > u) return order[k]!;
  }
  // Rounding left u at the very top: the last token with any mass.
  for (let k = kept - 1; k >= 0; k--) if (probs[order[k]!]! > 0) return order[k]!;
  return order[0]!;
}
