import type { KernelTensor, Storage } from '../../core/backend.js';
import type { TypedArray } from '../../core/dtype.js';
import { registerKernels } from '../../core/kernels.js';
import { sizeOf, stridesOf, type Shape } from '../../core/shape.js';
import { data, store, type HostBackend } from './host.js';
import { broadcastOffsets, putAt, stridedOffsets, takeAt } from './strided.js';

/** Layout kernels: each an offset map (`strided.ts`) read with `takeAt` or written with `putAt`. */

const taken = (b: HostBackend, x: KernelTensor, outShape: Shape, offsets: Int32Array | null): Storage => {
  const out = b.alloc(x.dtype, sizeOf(outShape));
  takeAt(data(x), offsets, out);
  return store(out);
};

// x [..] broadcast (NumPy rules) -> out [outShape]; its adjoint is a sum (the op's rule)
export function expand(b: HostBackend, x: KernelTensor, outShape: Shape): Storage {
  return taken(b, x, outShape, broadcastOffsets(x.shape, outShape));
}

// x [d0, .., dr] -> out [d_perm[0], .., d_perm[r]]; its adjoint is the inverse permutation
export function permute(b: HostBackend, x: KernelTensor, perm: readonly number[]): Storage {
  const strides = stridesOf(x.shape);
  const outShape = perm.map((p) => x.shape[p]!);
  return taken(
    b,
    x,
    outShape,
    stridedOffsets(
      outShape,
      perm.map((p) => strides[p]!),
    ),
  );
}

// x [..] -> out [outShape] = x[begin + i]
export function slice(b: HostBackend, x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
  const strides = stridesOf(x.shape);
  const offset = begin.reduce((s, v, i) => s + v * strides[i]!, 0);
  return taken(b, x, outShape, stridedOffsets(outShape, strides, offset));
}

/** Write x into `out` (of outShape) starting at `begin`. */
function place(out: TypedArray, outShape: Shape, x: KernelTensor, begin: readonly number[]): void {
  const strides = stridesOf(outShape);
  const offset = begin.reduce((s, v, i) => s + v * strides[i]!, 0);
  putAt(data(x), stridedOffsets(x.shape, strides, offset), out);
}

// slice's adjoint: x [..] -> out [outShape], zero but out[begin + i] = x[i]
export function pad(b: HostBackend, x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
  const out = b.alloc(x.dtype, sizeOf(outShape));
  place(out, outShape, x, begin);
  return store(out);
}

// xs [.., n_i, ..] -> out [.., sum n_i, ..] along axis; its adjoint is slices
export function concat(b: HostBackend, xs: readonly KernelTensor[], axis: number, outShape: Shape): Storage {
  const out = b.alloc(xs[0]!.dtype, sizeOf(outShape));
  let off = 0;
  for (const x of xs) {
    const begin = outShape.map((_, i) => (i === axis ? off : 0));
    place(out, outShape, x, begin);
    off += x.shape[axis]!;
  }
  return store(out);
}

// dst [..], src [..] -> dst with src at [begin, begin + src.shape): in dst's storage when inPlace
export function updateSlice(
  b: HostBackend,
  dst: KernelTensor,
  src: KernelTensor,
  begin: readonly number[],
  inPlace: boolean,
): Storage {
  let out = data(dst);
  if (!inPlace) {
    out = b.alloc(dst.dtype, out.length);
    out.set(data(dst));
  }
  place(out, dst.shape, src, begin);
  return store(out);
}

registerKernels<HostBackend>('reference', { expand, permute, slice, pad, concat, updateSlice });
