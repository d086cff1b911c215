import type { Backend, KernelTensor, Storage } from './backend.js';
import type { DType } from './dtype.js';
import { DuplicateKernelError, MissingKernelError } from './errors.js';
import type { Shape } from './shape.js';

/**
 * The kernels, and the registry that gives each backend its own (as tfjs's `registerKernel`).
 *
 * `Kernels` is every kernel's signature, in the spirit of tinygrad kept small: the op layer in `src/ops/` composes
 * everything else from these. Kernels never read data back to the host, so an asynchronous device (WebGPU) can
 * queue them; tensors are always contiguous and row-major. A backend (`core/backend.ts`) holds only memory and
 * identity; its kernels are registered here by (kernel name, backend name), each a function taking the backend
 * (its own class) first, then the kernel's arguments. `kernelsFor(backend)` resolves the whole table for one
 * backend instance; the op door (`src/ops/op.ts`) passes it to every kernel callback.
 *
 * A backend may register only some kernels and name another backend whose kernels can read its storage
 * (`Backend.fallbackKernels`, e.g. `'reference'`): the kernels it lacks run that backend's, with the backend
 * itself as their first argument, and every such call is counted (`fallbackCounts`). Without a fallback a
 * missing kernel throws `MissingKernelError` when it is called.
 */

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
  /**
   * This step's values on the device, in place of `lr` and `step` (a recorded step reads them there, as optax
   * keeps its step count on the device): f32 [4] = (lr, 1 - beta1^step, 1 - beta2^step, 1 - lr wd), where wd is
   * the one nonzero weight decay of `weightDecays` (a leaf whose decay is 0 is not decayed).
   * `adamwScheduleValues` (nn/optim.ts) computes it.
   */
  readonly schedule?: KernelTensor;
}

/** A multi-tensor AdamW step's values as a schedule tensor holds them (`AdamWManyHyper.schedule`), on the host. */
export interface AdamWStepValues {
  readonly lr: number;
  /** 1 - beta1^step and 1 - beta2^step. */
  readonly c1: number;
  readonly c2: number;
  /** 1 - lr wd, the decay factor of a decayed leaf. */
  readonly decay: number;
}

/**
 * The step's values: from the schedule tensor's host data if there is one, else from `lr` and `step` (in f64), the
 * one statement of the bias corrections and the decay factor every AdamW kernel and the schedule tensor use.
 */
export function adamwStepValues(
  h: Pick<AdamWHyper, 'lr' | 'beta1' | 'beta2' | 'step'>,
  schedule: ArrayLike<number> | null,
  weightDecay: number,
): AdamWStepValues {
  if (schedule)
    return { lr: schedule[0]!, c1: schedule[1]!, c2: schedule[2]!, decay: weightDecay === 0 ? 1 : schedule[3]! };
  return { lr: h.lr, c1: 1 - h.beta1 ** h.step, c2: 1 - h.beta2 ** h.step, decay: 1 - h.lr * weightDecay };
}

/**
 * Which of one leaf's parameter and moments a multi-tensor AdamW kernel updates in place (the op layer donated
 * them, `adamwUpdateMany`'s `donate`): the kernel writes that output into the input's own storage and returns that
 * storage. Safe elementwise: element i of each output depends on element i of the inputs alone.
 */
export interface AdamWInPlace {
  readonly param: boolean;
  readonly m: boolean;
  readonly v: boolean;
}

/** Keys with a bias at or below this are masked (the policy's padding bias, -1e9, is); see `Kernels.attention`. */
export const MASKED_KEY_BIAS = -5e8;

/** Every kernel, as the op layer calls it (the backend already bound). */
export interface Kernels {
  /** A new tensor of `shape` with every entry `value`. */
  fill(shape: Shape, dtype: DType, value: number): Storage;
  /** x converted to `dtype` (to i32: truncated toward zero). */
  cast(x: KernelTensor, dtype: DType): Storage;
  /** Broadcast x to outShape (NumPy rules), materialised. */
  expand(x: KernelTensor, outShape: Shape): Storage;
  /** An elementwise op of `src/core/elementwise-kernels.ts` on every entry (same shape and dtype). */
  unary(op: UnaryOp, x: KernelTensor): Storage;
  /** Elementwise with NumPy broadcasting; the output has `outShape` and the dtype of `a` (inputs share a dtype). */
  binary(op: BinaryOp, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage;
  /** cond ? a : b, broadcasting all three to `outShape`; cond is nonzero-means-true in any dtype. */
  where(cond: KernelTensor, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage;
  /** Reduce over `axes` (sorted, unique); the output keeps them as size-1 dims. */
  reduce(op: ReduceOp, x: KernelTensor, axes: readonly number[]): Storage;
  /**
   * Batched matmul: a is [...batchA, M, K] (or [..., K, M] if transA), b is [...batchB, K, N] (or [..., N, K] if transB);
   * batch dims broadcast to outShape[:-2]. With `addend` (outShape, a's dtype) the result is addend + A B: the
   * tape's add of a gathered cotangent folded into the product's store (`absorbed`, core/tape.ts).
   */
  matmul(
    a: KernelTensor,
    b: KernelTensor,
    transA: boolean,
    transB: boolean,
    outShape: Shape,
    addend: KernelTensor | null,
  ): Storage;
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
  /**
   * [dx, dweight] of rmsNorm for cotangent dy; with `prior` (x's shape) dx is prior + the norm's dx, one kernel
   * doing the add the tape would have made (`absorbed`, core/tape.ts).
   */
  rmsNormBackward(
    x: KernelTensor,
    weight: KernelTensor,
    dy: KernelTensor,
    eps: number,
    prior: KernelTensor | null,
  ): [Storage, Storage];
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

  // Fused kernels of the hot paths (fewer, bigger dispatches), each with a plain-loop reference kernel.
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
   * Returns [param, m, v] per leaf: new storages, except where `inPlace` (one per leaf; absent: none) says to write
   * into the input's own, which is then returned.
   */
  adamwMany(
    params: readonly KernelTensor[],
    grads: readonly KernelTensor[],
    m: readonly KernelTensor[],
    v: readonly KernelTensor[],
    sumSquares: KernelTensor | null,
    hyper: AdamWManyHyper,
    inPlace?: readonly AdamWInPlace[],
  ): [Storage, Storage, Storage][];

  /**
   * One token per row of log-probs [B, V] (temperature already applied, log-softmaxed), as `chooseToken`
   * (core/sampling.ts) defines it: greedy, the first argmax; else the top-p nucleus and the inverse CDF at the
   * row's uniform draw `draws[row]` in [0, 1) (draws [B], f32 or f64; ignored when greedy). Returns [ids [B] (i32),
   * the log-prob of each chosen id [B] (logProbs' dtype)], so a sampler reads back 2 B numbers instead of B V.
   */
  sampleTokens(logProbs: KernelTensor, draws: KernelTensor, greedy: boolean, topP: number): [Storage, Storage];
}

export type KernelName = keyof Kernels;

/** Every kernel name at run time; typed so that a kernel added to `Kernels` and not here fails to compile. */
const KERNEL_NAME_SET: Readonly<Record<KernelName, true>> = {
  fill: true,
  cast: true,
  expand: true,
  unary: true,
  binary: true,
  where: true,
  reduce: true,
  matmul: true,
  permute: true,
  slice: true,
  pad: true,
  concat: true,
  updateSlice: true,
  gather: true,
  scatterAdd: true,
  takeAlongAxis: true,
  putAlongAxisAdd: true,
  softmax: true,
  rmsNorm: true,
  rmsNormBackward: true,
  layerNorm: true,
  layerNormBackward: true,
  adamw: true,
  attention: true,
  attentionBackward: true,
  rope: true,
  addRmsNorm: true,
  swiglu: true,
  swigluBackward: true,
  tokenLogProbs: true,
  tokenLogProbsBackward: true,
  sumSquares: true,
  adamwMany: true,
  sampleTokens: true,
};
export const KERNEL_NAMES = Object.keys(KERNEL_NAME_SET) as readonly KernelName[];

/** A kernel as a backend implements it: the backend first (its own class, `B`), then the kernel's arguments. */
export type KernelFunc<K extends KernelName, B extends Backend = Backend> = (
  backend: B,
  ...args: Parameters<Kernels[K]>
) => ReturnType<Kernels[K]>;

/** Kernel functions by name, for `registerKernels`. */
export type KernelFuncs<B extends Backend = Backend> = { readonly [K in KernelName]: KernelFunc<K, B> };

export interface KernelConfig<K extends KernelName, B extends Backend = Backend> {
  readonly kernelName: K;
  /** The `name` of the backends this kernel serves. Their instances must be `B`s. */
  readonly backendName: string;
  readonly kernelFunc: KernelFunc<K, B>;
}

// The registry stores every function untyped; `registerKernel`'s signature is what ties a kernel to its arguments.
type AnyKernelFunc = (backend: Backend, ...args: unknown[]) => unknown;
const registry = new Map<string, Map<KernelName, AnyKernelFunc>>();
// Bumped by every registration: a table resolved before it is resolved again on its next use.
let generation = 0;

/**
 * Register one kernel for one backend name. Registering a (kernel, backend) pair twice throws
 * `DuplicateKernelError`. A registration made after a backend's table was resolved is used from the next call of
 * `kernelsFor` on (every op calls it).
 */
export function registerKernel<K extends KernelName, B extends Backend = Backend>(cfg: KernelConfig<K, B>): void {
  const own = registry.get(cfg.backendName) ?? new Map<KernelName, AnyKernelFunc>();
  registry.set(cfg.backendName, own);
  if (own.has(cfg.kernelName)) throw new DuplicateKernelError(cfg.kernelName, cfg.backendName);
  own.set(cfg.kernelName, cfg.kernelFunc as unknown as AnyKernelFunc);
  generation++;
}

/**
 * Register a table of kernels for one backend name, each taking that backend's own class `B` first. All or
 * nothing: if one of them is already registered, `DuplicateKernelError` is thrown before any is.
 */
export function registerKernels<B extends Backend>(backendName: string, kernels: Partial<KernelFuncs<B>>): void {
  const names = KERNEL_NAMES.filter((name) => kernels[name] !== undefined);
  const taken = names.find((name) => registry.get(backendName)?.has(name));
  if (taken !== undefined) throw new DuplicateKernelError(taken, backendName);
  for (const kernelName of names)
    registerKernel({ kernelName, backendName, kernelFunc: kernels[kernelName]! } as KernelConfig<KernelName, B>);
}

/** The kernels registered for a backend name (not counting its fallback's). */
export function registeredKernels(backendName: string): KernelName[] {
  const own = registry.get(backendName);
  return KERNEL_NAMES.filter((name) => own?.has(name) ?? false);
}

interface Resolved {
  readonly generation: number;
  readonly kernels: Kernels;
}
const tables = new WeakMap<Backend, Resolved>();
const counts = new WeakMap<Backend, Record<string, number>>();

/**
 * The kernel table of one backend instance: its own registrations, else its `fallbackKernels` backend's (each call
 * counted), else a function that throws `MissingKernelError` naming the kernel and the backend. Cached per
 * instance until the next registration.
 */
export function kernelsFor(backend: Backend): Kernels {
  const cached = tables.get(backend);
  if (cached !== undefined && cached.generation === generation) return cached.kernels;
  const kernels = resolve(backend);
  tables.set(backend, { generation, kernels });
  return kernels;
}

function resolve(backend: Backend): Kernels {
  const own = registry.get(backend.name);
  const fallbackName = backend.fallbackKernels !== backend.name ? backend.fallbackKernels : undefined;
  const fallback = fallbackName === undefined ? undefined : registry.get(fallbackName);
  const table: Partial<Record<KernelName, (...args: unknown[]) => unknown>> = {};
  for (const name of KERNEL_NAMES) {
    const f = own?.get(name);
    const g = fallback?.get(name);
    if (f !== undefined) table[name] = f.bind(undefined, backend);
    else if (g !== undefined)
      table[name] = (...args) => {
        countFallback(backend, name);
        return g(backend, ...args);
      };
    else
      table[name] = () => {
        throw new MissingKernelError(name, backend.name, fallbackName);
      };
  }
  return table as unknown as Kernels;
}

/**
 * The kernel `name` of `backend.fallbackKernels`, for a kernel of the backend's own that covers only some cases
 * (a dtype, a shape): calling it counts one fallback call, as an unregistered kernel's do.
 */
export function fallbackKernel<K extends KernelName>(backend: Backend, name: K): Kernels[K] {
  const fallbackName = backend.fallbackKernels;
  const g =
    fallbackName === undefined || fallbackName === backend.name ? undefined : registry.get(fallbackName)?.get(name);
  if (g === undefined) throw new MissingKernelError(name, backend.name, fallbackName);
  return ((...args: unknown[]) => {
    countFallback(backend, name);
    return g(backend, ...args);
  }) as unknown as Kernels[K];
}

function countFallback(backend: Backend, name: KernelName): void {
  const c = counts.get(backend);
  if (c === undefined) counts.set(backend, { [name]: 1 });
  else c[name] = (c[name] ?? 0) + 1;
}

/** How many times each kernel of this backend instance ran its fallback's kernel (kernels that never did: absent). */
export function fallbackCounts(backend: Backend): Readonly<Record<string, number>> {
  return { ...counts.get(backend) };
}

export function resetFallbackCounts(backend: Backend): void {
  counts.delete(backend);
}
