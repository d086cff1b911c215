import type { DType, TypedArray } from './dtype.js';
import type { Shape } from './shape.js';

/**
 * The kernel interface every backend implements. It is deliberately small (in the spirit of tinygrad): the op
 * layer in `src/ops/` composes everything else from these. Kernels never read data back to the host, so an
 * asynchronous device (WebGPU) can queue them; tensors are always contiguous and row-major.
 *
 * Storage is opaque to the op layer: a typed array on the CPU, a GPUBuffer on WebGPU.
 */
export interface Storage {
  readonly __storage: unique symbol;
}

export interface KernelTensor {
  readonly storage: Storage;
  readonly shape: Shape;
  readonly dtype: DType;
}

export type UnaryOp =
  | 'neg' | 'exp' | 'log' | 'sqrt' | 'rsqrt' | 'tanh' | 'sigmoid' | 'gelu' | 'silu' | 'abs' | 'square'
  | 'sign' | 'reciprocal' | 'relu' | 'step'
  // derivatives that would otherwise need several kernels
  | 'geluGrad' | 'siluGrad';

export type BinaryOp =
  | 'add' | 'sub' | 'mul' | 'div' | 'pow' | 'maximum' | 'minimum'
  // comparisons produce 1 or 0 in the output dtype
  | 'eq' | 'ne' | 'lt' | 'le' | 'gt' | 'ge';

export type ReduceOp = 'sum' | 'max' | 'min' | 'logsumexp';

/** Hyperparameters of one AdamW step (decoupled weight decay, bias-corrected moments, as PyTorch's AdamW). */
export interface AdamWHyper {
  readonly lr: number;
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  /** 1-based step count, for bias correction. */
  readonly step: number;
}

export interface MemoryInfo {
  /** Live allocations (buffers or typed arrays) owned by the backend. */
  readonly buffers: number;
  readonly bytes: number;
}

export interface Backend {
  /** Its name in the backend registry (`src/backends/registry.ts`). */
  readonly name: string;
  supportsDType(dtype: DType): boolean;
  /** Whether `readSync` works (the CPU backend) or only the async `read` (WebGPU). */
  readonly synchronous: boolean;
  /**
   * Whether a row's results are independent of the batch's shape (its width, padding, other rows), so the KV-cache
   * sampler's log-probs equal a full forward's bit for bit. A GPU picks kernels and tilings by shape: false there.
   */
  readonly batchInvariant: boolean;
  /** One line naming the backend and its device, for logs and reports. */
  describe(): string;
  /** The largest single buffer it can bind (a GPU's storage-binding limit); undefined: host memory bounds it. */
  readonly maxBufferBytes?: number;

  upload(values: TypedArray, dtype: DType): Storage;
  read(x: KernelTensor): Promise<TypedArray>;
  readSync(x: KernelTensor): TypedArray;
  free(storage: Storage): void;
  memory(): MemoryInfo;
  /** Release the device. The backend is unusable afterwards. */
  dispose(): void;

  fill(shape: Shape, dtype: DType, value: number): Storage;
  cast(x: KernelTensor, dtype: DType): Storage;
  /** Broadcast x to outShape (NumPy rules), materialised. */
  expand(x: KernelTensor, outShape: Shape): Storage;
  unary(op: UnaryOp, x: KernelTensor): Storage;
  /** Elementwise with NumPy broadcasting; the output has `outShape` and the dtype of `a` (inputs share a dtype). */
  binary(op: BinaryOp, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage;
  /** cond ? a : b, broadcasting all three to `outShape`; cond is nonzero-means-true in any dtype. */
  where(cond: KernelTensor, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage;
  /** Reduce over `axes` (sorted, unique); the output keeps them as size-1 dims. */
  reduce(op: ReduceOp, x: KernelTensor, axes: readonly number[]): Storage;
  /**
   * Batched matmul: a is [...batchA, M, K] (or [..., K, M] if transA), b is [...batchB, K, N] (or [..., N, K] if transB);
   * batch dims broadcast to outShape[:-2].
   */
  matmul(a: KernelTensor, b: KernelTensor, transA: boolean, transB: boolean, outShape: Shape): Storage;
  permute(x: KernelTensor, perm: readonly number[]): Storage;
  /** out[i] = x[begin + i] for i < outShape. */
  slice(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage;
  /** Zero padding: out[begin + i] = x[i], zero elsewhere. The adjoint of slice. */
  pad(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage;
  concat(xs: readonly KernelTensor[], axis: number, outShape: Shape): Storage;
  /** out = x indexed along `axis` by `indices` (i32): out.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:]. */
  gather(x: KernelTensor, indices: KernelTensor, axis: number): Storage;
  /** The adjoint of gather: zeros of outShape with updates added at the gathered positions (duplicates sum). */
  scatterAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage;
  /** out[..., i, ...] = x[..., indices[..., i, ...], ...] along `axis`; indices has x's rank (torch.gather). */
  takeAlongAxis(x: KernelTensor, indices: KernelTensor, axis: number): Storage;
  /** The adjoint of takeAlongAxis: zeros of outShape with updates added at indexed positions. */
  putAlongAxisAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage;
  /** Numerically stable softmax (or log-softmax) along `axis`. */
  softmax(x: KernelTensor, axis: number, log: boolean): Storage;
  /** y = x / sqrt(mean(x^2, last axis) + eps) * weight. */
  rmsNorm(x: KernelTensor, weight: KernelTensor, eps: number): Storage;
  /** [dx, dweight] of rmsNorm for cotangent dy. */
  rmsNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage];
  /** y = (x - mean) / sqrt(var + eps) * weight + bias over the last axis (population variance). */
  layerNorm(x: KernelTensor, weight: KernelTensor, bias: KernelTensor, eps: number): Storage;
  /** [dx, dweight, dbias] of layerNorm for cotangent dy. */
  layerNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage, Storage];
  /** One fused AdamW step: returns [param, m, v] updated (new storages; the inputs are not modified). */
  adamw(param: KernelTensor, grad: KernelTensor, m: KernelTensor, v: KernelTensor, hyper: AdamWHyper): [Storage, Storage, Storage];
}
