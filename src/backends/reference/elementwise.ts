import type { KernelTensor, Storage } from '../../core/backend.js';
import { isHalf, type DType } from '../../core/dtype.js';
import { widenHalf } from '../../core/half.js';
import { BINARY_KERNELS, UNARY_KERNELS } from '../../core/elementwise-kernels.js';
import { registerKernels, type BinaryOp, type UnaryOp } from '../../core/kernels.js';
import { sizeOf, type Shape } from '../../core/shape.js';
import { data, halfData, store, type HostBackend } from './host.js';
import { broadcastOffsets } from './strided.js';

/**
 * Elementwise kernels: fill, cast, and the generic unary, binary and where over the scalar definitions of
 * `core/elementwise-kernels.ts` (their `js` functions). Their backwards are elementwise ops themselves (the rules
 * in `src/ops/elementwise.ts`).
 */

// out [shape] = value
export function fill(b: HostBackend, shape: Shape, dtype: DType, value: number): Storage {
  const a = b.alloc(dtype, sizeOf(shape));
  a.fill(value);
  return store(a);
}

// x [n] -> out [n] in dtype; to i32 truncates toward zero; bf16/f16 widen to f32 (the only cast the op allows them)
export function cast(b: HostBackend, x: KernelTensor, dtype: DType): Storage {
  if (isHalf(x.dtype)) return store(widenHalf(x.dtype, halfData(x), b.alloc('f32', sizeOf(x.shape)) as Float32Array));
  const src = data(x);
  const out = b.alloc(dtype, src.length);
  if (dtype === 'i32') for (let i = 0; i < src.length; i++) out[i] = Math.trunc(src[i]!);
  else out.set(src);
  return store(out);
}

// x [n] -> out [n] = f(x)
export function unary(b: HostBackend, op: UnaryOp, x: KernelTensor): Storage {
  const f = UNARY_KERNELS[op].js;
  const src = data(x);
  const out = b.alloc(x.dtype, src.length);
  for (let i = 0; i < src.length; i++) out[i] = f(src[i]!);
  return store(out);
}

// a, b broadcast to [outShape] -> out [outShape] = f(a, b), in a's dtype
export function binary(b: HostBackend, op: BinaryOp, x: KernelTensor, y: KernelTensor, outShape: Shape): Storage {
  const f = BINARY_KERNELS[op].js;
  const da = data(x);
  const db = data(y);
  const out = b.alloc(x.dtype, sizeOf(outShape));
  const ia = broadcastOffsets(x.shape, outShape);
  const ib = broadcastOffsets(y.shape, outShape);
  if (!ia && !ib) for (let i = 0; i < out.length; i++) out[i] = f(da[i]!, db[i]!);
  else if (!ia && y.shape.every((d) => d === 1)) {
    const s = db[0]!;
    for (let i = 0; i < out.length; i++) out[i] = f(da[i]!, s);
  } else {
    for (let i = 0; i < out.length; i++) out[i] = f(da[ia ? ia[i]! : i]!, db[ib ? ib[i]! : i]!);
  }
  return store(out);
}

// cond, x, y broadcast to [outShape] -> out [outShape] = cond != 0 ? x : y
export function where(b: HostBackend, cond: KernelTensor, x: KernelTensor, y: KernelTensor, outShape: Shape): Storage {
  const dc = data(cond);
  const da = data(x);
  const db = data(y);
  const ic = broadcastOffsets(cond.shape, outShape);
  const ia = broadcastOffsets(x.shape, outShape);
  const ib = broadcastOffsets(y.shape, outShape);
  const out = b.alloc(x.dtype, sizeOf(outShape));
  for (let i = 0; i < out.length; i++) out[i] = dc[ic ? ic[i]! : i] !== 0 ? da[ia ? ia[i]! : i]! : db[ib ? ib[i]! : i]!;
  return store(out);
}

registerKernels<HostBackend>('reference', { fill, cast, unary, binary, where });
