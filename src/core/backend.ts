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
  | 'neg'
  | 'exp'
  | 'log'
  | 'sqrt'
  | 'rsqrt'
  | 'tanh'
  | 'sigmoid'
  | 'gelu'
  | 'silu'
  | 'abs'
  | 'square'
  | 'sign'
  | 'reciprocal'
  | 'relu'
  | 'step'
  // derivatives that would otherwise need several kernels
  | 'geluGrad'
  | 'siluGrad';

export type BinaryOp =
  | 'add'
  | 'sub'
  | 'mul'
  | 'div'
  | 'pow'
  | 'maximum'
  | 'minimum'
  // comparisons produce 1 or 0 in the output dtype
  | 'eq'
  | 'ne'
  | 'lt'
  | 'le'
  | 'gt'
  | 'ge';

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

/** Hyperparameters of a multi-tensor AdamW step: one per leaf for weight decay, clipping by a global norm. */
export interface AdamWManyHyper extends Omit<AdamWHyper, 'weightDecay'> {
  /** Weight decay of each leaf, in order. */
  readonly weightDecays: readonly number[];
  /** Scale gradients by min(1, maxNorm / (sqrt(sumSquares) + 1e-6)) before the step (clip_grad_norm_). */
  readonly maxNorm?: number;
}

export interface MemoryInfo {
  /** Live allocations (buffers or typed arrays) owned by the backend. */
  readonly buffers: number;
  readonly bytes: number;
}

/** Keys with a bias at or below this are masked (the policy's padding bias, -1e9, is); see `Backend.attention`. */
export const MASKED_KEY_BIAS = -5e8;

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
  /**
   * dst with src written at [begin, begin + src.shape) (XLA's DynamicUpdateSlice; in range, same dtype). With
   * `inPlace` the kernel writes into dst's storage and returns it (the op layer donates a uniquely owned dst);
   * otherwise it returns a new storage and leaves dst as it was.
   */
  updateSlice(dst: KernelTensor, src: KernelTensor, begin: readonly number[], inPlace: boolean): Storage;
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
  adamw(
    param: KernelTensor,
    grad: KernelTensor,
    m: KernelTensor,
    v: KernelTensor,
    hyper: AdamWHyper,
  ): [Storage, Storage, Storage];

  // Fused kernels of the hot paths (fewer, bigger dispatches). Each has a plain-loop reference on the CPU.
  /**
   * Causal attention, flash-style (scores never stored): q [B, Tq, Hq, D], k and v [B, Tk, Hkv, D] (Hq a multiple
   * of Hkv; query head h reads key/value head floor(h / (Hq / Hkv))), keyBias [B, Tk] added to every score of
   * its key (or null). Of the Tk key rows only the first `keyLength` (<= Tk; a preallocated KV cache's filled
   * part) are keys: query i sees keys 0 .. i + keyLength - Tq. Output [B, Tq, Hq, D]. A key whose bias is at or
   * below `MASKED_KEY_BIAS` is masked, and a query whose own key (i + keyLength - Tq) is masked outputs 0 and
   * passes no gradient: PyTorch's sdpa gives a padding query's fully masked row 0 (with left padding it sees
   * only padding).
   */
  attention(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    scale: number,
    keyLength: number,
  ): Storage;
  /** [dq, dk, dv] of `attention` (every key row a key) for cotangent dOut, given its output `out`. */
  attentionBackward(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    out: KernelTensor,
    dOut: KernelTensor,
    scale: number,
  ): [Storage, Storage, Storage];
  /**
   * Rotate-half RoPE of one or two tensors (a layer's queries and keys, in one dispatch): each x [..., H, D] with
   * cos and sin [..., 1, D/2] (one row per leading index, shared by the heads and the tensors):
   * (x1 c - x2 s, x2 c + x1 s); `inverse` rotates the other way (x1 c + x2 s, x2 c - x1 s), its adjoint.
   */
  rope(xs: readonly KernelTensor[], cos: KernelTensor, sin: KernelTensor, inverse: boolean): Storage[];
  /** [x + delta, rmsNorm(x + delta)] (same shapes), a residual add and the next pre-norm in one kernel. */
  addRmsNorm(x: KernelTensor, delta: KernelTensor, weight: KernelTensor, eps: number): [Storage, Storage];
  /** SwiGLU's gate: silu(gate) * up, elementwise (same shapes). */
  swiglu(gate: KernelTensor, up: KernelTensor): Storage;
  /** [dgate, dup] of `swiglu` for cotangent dy. */
  swigluBackward(gate: KernelTensor, up: KernelTensor, dy: KernelTensor): [Storage, Storage];
  /**
   * log softmax(scale * logits)[target] over the last axis: logits [..., V], targets [...] (i32) -> [...];
   * NaN for a target outside [0, V).
   */
  tokenLogProbs(logits: KernelTensor, targets: KernelTensor, scale: number): Storage;
  /** d logits [..., V] of `tokenLogProbs` for cotangent dy [...]: dy scale (onehot(target) - softmax(scale logits)). */
  tokenLogProbsBackward(logits: KernelTensor, targets: KernelTensor, dy: KernelTensor, scale: number): Storage;
  /** sum over every tensor of the sum of its squared entries, as a scalar [] (at least one tensor). */
  sumSquares(xs: readonly KernelTensor[]): Storage;
  /**
   * AdamW on a list of leaves in as few dispatches as the device allows; with `maxNorm`, the gradients are first
   * scaled by the clip factor of the global norm sqrt(sumSquares) (a scalar tensor, never read to the host).
   * Returns [param, m, v] per leaf.
   */
  adamwMany(
    params: readonly KernelTensor[],
    grads: readonly KernelTensor[],
    m: readonly KernelTensor[],
    v: readonly KernelTensor[],
    sumSquares: KernelTensor | null,
    hyper: AdamWManyHyper,
  ): [Storage, Storage, Storage][];
}
