import type { KernelTensor, Storage } from '../../core/backend.js';
import { registerKernels, type ReduceOp } from '../../core/kernels.js';
import { sizeOf, stridesOf } from '../../core/shape.js';
import { data, store, type HostBackend } from './host.js';
import { addAt, stridedOffsets } from './strided.js';

/**
 * x [..] -> out [..] with the `axes` kept as size 1, accumulated in double precision and rounded once. Every
 * input element goes to the output element of its offset map (`stridedOffsets` with the reduced axes' strides 0);
 * a sum accumulates it with `addAt`, the indexing kernels' loop. The backwards are ops (`src/ops/reduce.ts`).
 */
export function reduce(b: HostBackend, op: ReduceOp, x: KernelTensor, axes: readonly number[]): Storage {
  const src = data(x);
  const keptShape = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  // For each input element, the output element it reduces into.
  const target = stridedOffsets(
    x.shape,
    x.shape.map((_, i) => (axes.includes(i) ? 0 : stridesOf(keptShape)[i]!)),
  );
  const n = sizeOf(keptShape);
  const acc = new Float64Array(n);
  if (op === 'sum') {
    addAt(src, target, acc);
  } else if (op === 'max' || op === 'min') {
    acc.fill(op === 'max' ? -Infinity : Infinity);
    for (let i = 0; i < src.length; i++) {
      const v = src[i]!;
      const t = target[i]!;
      if (op === 'max' ? v > acc[t]! || Number.isNaN(v) : v < acc[t]! || Number.isNaN(v)) acc[t] = v;
    }
  } else {
    const mx = new Float64Array(n).fill(-Infinity);
    for (let i = 0; i < src.length; i++) if (src[i]! > mx[target[i]!]!) mx[target[i]!] = src[i]!;
    for (let i = 0; i < src.length; i++) {
      const m = mx[target[i]!]!;
      acc[target[i]!] = acc[target[i]!]! + (m === -Infinity ? 0 : Math.exp(src[i]! - m));
    }
    for (let j = 0; j < n; j++) acc[j] = mx[j] === -Infinity ? -Infinity : Math.log(acc[j]!) + mx[j]!;
  }
  const out = b.alloc(x.dtype, n);
  out.set(acc);
  return store(out);
}

registerKernels<HostBackend>('reference', { reduce });
