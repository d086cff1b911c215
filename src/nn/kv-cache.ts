import type { Tensor } from '../core/tensor.js';
import { dispose } from '../core/scope.js';

/**
 * Keys and values of the positions seen so far, per layer: k and v are [B, length, nKvHeads, headDim] (the
 * attention kernel's layout), keys already rotated by RoPE at their positions. With it, generating a token
 * costs one step of attention over the
 * prefix instead of a forward over the whole sequence. Immutable like everything else: a forward returns a
 * new, longer cache, and the caller disposes the old one (`disposeCache`) when it no longer needs it.
 */
export type KvCache = {
  readonly layers: readonly { readonly k: Tensor; readonly v: Tensor }[];
  /** The additive key bias [B, length] (padding masks), or null when no position is masked. */
  readonly keyBias: Tensor | null;
  readonly length: number;
};

export function disposeCache(cache: KvCache | null): void {
  if (cache) dispose(cache);
}
