/**
 * RCC's delta per rollout from the log-probs the sampler recorded on the host (no readback): the masked sum of
 * log pi_old - log pi_ref over the completion, or that sum over max(1, L) for `mean`.
 */
export function hostSequenceDeltas(oldLogProbs: Float32Array, refLogProbs: Float32Array, mask: Float32Array, completionLen: number, mode: 'sum' | 'mean'): number[] {
  const rows = mask.length / completionLen;
  return Array.from({ length: rows }, (_, r) => {
    let total = 0;
    let len = 0;
    for (let t = 0; t < completionLen; t++) {
      const i = r * completionLen + t;
      if (mask[i] === 0) continue;
      total += oldLogProbs[i]! - refLogProbs[i]!;
      len++;
    }
    return mode === 'sum' ? total : total / Math.max(1, len);
  });
}
