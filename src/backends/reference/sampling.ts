import type { KernelTensor, Storage } from '../../core/backend.js';
import { registerKernels } from '../../core/kernels.js';
import { chooseToken } from '../../core/sampling.js';
import { data, store, type HostBackend } from './host.js';

/**
 * Token choice where the log-probs are: `chooseToken` (core/sampling.ts, f64) on each row, read in place (on the
 * CPU backend, through its fallback, the view of the WebAssembly memory: no copy). The ids are therefore exactly
 * those of `chooseToken` on the host given the same draws.
 */

// logProbs [B, V], draws [B] -> ids [B] (i32), logProbs[b, ids[b]] [B] (logProbs' dtype)
export function sampleTokens(
  b: HostBackend,
  logProbsT: KernelTensor,
  drawsT: KernelTensor,
  greedy: boolean,
  topP: number,
): [Storage, Storage] {
  const [logProbs, draws] = [data(logProbsT), data(drawsT)];
  const [rows, v] = [logProbsT.shape[0]!, logProbsT.shape[1]!];
  const ids = b.alloc('i32', rows);
  const chosen = b.alloc(logProbsT.dtype, rows);
  for (let r = 0; r < rows; r++) {
    const id = chooseToken(logProbs, r * v, v, draws[r]!, greedy, topP);
    ids[r] = id;
    chosen[r] = logProbs[r * v + id]!;
  }
  return [store(ids), store(chosen)];
}

registerKernels<HostBackend>('reference', { sampleTokens });
