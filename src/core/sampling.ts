/**
 * Choosing one token from a row of log-probs, given its uniform draw: the definition every backend's
 * `sampleTokens` kernel follows (the reference kernel calls this). Greedy is the first argmax. Otherwise
 * probs = exp(logprob) in f64 (the temperature is already in the log-probs); with topP < 1 they are ordered by
 * (prob descending, id ascending) and cut to the smallest prefix whose mass reaches topP times the row's total;
 * then the first token of that order whose cumulative mass exceeds u times the kept mass, with rounding at the
 * very top falling back to the last kept token with any mass. u lies in [0, 1) and is ignored when greedy.
 */
export function chooseToken(
  logProbs: ArrayLike<number>,
  offset: number,
  vocab: number,
  u: number,
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
  if (topP >= 1) return inIdOrder(probs, u);
  // The smallest set of most likely tokens whose mass reaches topP (ties broken by id, for determinism).
  const order = Array.from({ length: vocab }, (_, i) => i).sort((a, b) => probs[b]! - probs[a]! || a - b);
  const total = probs.reduce((s, p) => s + p, 0);
  let mass = 0;
  let kept = 0;
  while (kept < vocab && (kept === 0 || mass < topP * total)) mass += probs[order[kept++]!]!;
  const threshold = u * mass;
  let cum = 0;
  for (let k = 0; k < kept; k++) {
    cum += probs[order[k]!]!;
    if (cum > threshold) return order[k]!;
  }
  // Rounding left u at the very top: the last token with any mass.
  for (let k = kept - 1; k >= 0; k--) if (probs[order[k]!]! > 0) return order[k]!;
  return order[0]!;
}

/**
 * The same walk without a nucleus, in id order: the general path with order = ids and kept = vocab, the same
 * sums in the same order (so the same ids), without building the order (a sampler calls this for every row).
 */
function inIdOrder(probs: Float64Array, u: number): number {
  let mass = 0;
  for (let k = 0; k < probs.length; k++) mass += probs[k]!;
  const threshold = u * mass;
  let cum = 0;
  for (let k = 0; k < probs.length; k++) {
    cum += probs[k]!;
    if (cum > threshold) return k;
  }
  for (let k = probs.length - 1; k >= 0; k--) if (probs[k]! > 0) return k;
  return 0;
}
