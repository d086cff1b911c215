import type {
  AdamWHyper,
  AdamWManyHyper,
  Backend,
  BinaryOp,
  KernelTensor,
  MemoryInfo,
  ReduceOp,
  Storage,
  UnaryOp,
} from '../../core/backend.js';
import { allocArray, type DType, type TypedArray } from '../../core/dtype.js';
import { BackendError } from '../../core/errors.js';
import { sizeOf, type Shape } from '../../core/shape.js';
import { acquireDevice, type AcquireOptions, type AdapterDescription } from './device.js';
import { adamw } from './kernels/adamw.js';
import { attention, attentionBackward } from './kernels/attention.js';
import { addRmsNorm, rope, swiglu, swigluBackward, tokenLogProbs } from './kernels/fused.js';
import { adamwMany, sumSquares } from './kernels/multi-tensor.js';
import { binaryExpr, elementwise, unaryExpr } from './kernels/elementwise.js';
import { gather, putAlongAxisAdd, scatterAdd, takeAlongAxis } from './kernels/indexing.js';
import { matmul } from './kernels/matmul.js';
import * as move from './kernels/movement.js';
import { layerNorm, layerNormBackward, rmsNorm, rmsNormBackward } from './kernels/norm.js';
import { reduce } from './kernels/reduce.js';
import { softmax } from './kernels/softmax.js';
import { GpuRuntime, type RuntimeOptions, type RuntimeStats } from './runtime.js';
import { asStorage, gpuStorage } from './storage.js';
import { wgslType } from './wgsl.js';

export interface WebGpuBackendOptions extends AcquireOptions, RuntimeOptions {}

/**
 * The WebGPU backend: every kernel of the `Backend` interface as WGSL compute shaders run through Dawn.
 * Kernels encode work and return at once (`synchronous` is false); `read()` is the only way back to the host.
 * Storage is f32 or i32 (f64 is CPU-only). Create it with `createWebGpuBackend()`, and `dispose()` it so the
 * device is destroyed and the process can exit.
 */
export class WebGpuBackend implements Backend {
  readonly name = 'webgpu';
  readonly synchronous = false;
  readonly batchInvariant = false;
  describe(): string {
    return `webgpu (${this.adapter.summary})`;
  }
  get maxBufferBytes(): number {
    return this.runtime.device.limits.maxStorageBufferBindingSize;
  }

  constructor(readonly runtime: GpuRuntime) {}

  get adapter(): AdapterDescription {
    return this.runtime.adapter;
  }

  supportsDType(dtype: DType): boolean {
    return dtype === 'f32' || dtype === 'i32';
  }

  private out(buffer: GPUBuffer): Storage {
    return asStorage(buffer);
  }

  upload(values: TypedArray, dtype: DType): Storage {
    wgslType('upload', dtype);
    const data =
      values.BYTES_PER_ELEMENT === 4 && (dtype === 'i32') === values instanceof Int32Array
        ? values
        : toDType(values, dtype);
    return this.out(this.runtime.upload(data));
  }

  async read(x: KernelTensor): Promise<TypedArray> {
    wgslType('read', x.dtype);
    const n = sizeOf(x.shape);
    const bytes = await this.runtime.read(gpuStorage(x.storage).buffer, n * 4);
    return x.dtype === 'i32' ? new Int32Array(bytes) : new Float32Array(bytes);
  }

  readSync(): TypedArray {
    throw new BackendError('webgpu', 'readSync: the WebGPU backend reads asynchronously; use `await tensor.data()`');
  }

  free(storage: Storage): void {
    const s = gpuStorage(storage);
    s.freed = true;
    this.runtime.release(s.buffer);
  }

  memory(): MemoryInfo {
    const s = this.runtime.pool.stats();
    return { buffers: s.liveBuffers, bytes: s.liveBytes };
  }

  /**
   * Pool and runtime counters: live, pending and idle buffers, pipelines, dispatches, submits, buffers created
   * (`createBuffer` calls), uploaded bytes and bind groups created.
   */
  stats(): RuntimeStats {
    return this.runtime.stats();
  }

  /** Submit pending work, wait for it, and throw any recorded GPU error. */
  sync(): Promise<void> {
    return this.runtime.sync();
  }

  dispose(): void {
    this.runtime.destroy();
  }

  fill(shape: Shape, dtype: DType, value: number): Storage {
    return this.out(move.fill(this.runtime, shape, dtype, value));
  }

  cast(x: KernelTensor, dtype: DType): Storage {
    const t = wgslType('cast', dtype);
    return this.out(
      elementwise(this.runtime, `cast.${x.dtype}.${dtype}`, [{ name: 'x', x }], `${t}(x)`, x.shape, dtype),
    );
  }

  expand(x: KernelTensor, outShape: Shape): Storage {
    return this.out(move.expand(this.runtime, x, outShape));
  }

  unary(op: UnaryOp, x: KernelTensor): Storage {
    return this.out(elementwise(this.runtime, op, [{ name: 'x', x }], unaryExpr(op, x.dtype), x.shape, x.dtype));
  }

  binary(op: BinaryOp, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage {
    const expr = binaryExpr(op, a.dtype);
    return this.out(
      elementwise(
        this.runtime,
        op,
        [
          { name: 'a', x: a },
          { name: 'b', x: b },
        ],
        expr,
        outShape,
        a.dtype,
      ),
    );
  }

  where(cond: KernelTensor, a: KernelTensor, b: KernelTensor, outShape: Shape): Storage {
    const zero = `${wgslType('where', cond.dtype)}(0)`;
    const inputs = [
      { name: 'cond', x: cond },
      { name: 'a', x: a },
      { name: 'b', x: b },
    ];
    return this.out(elementwise(this.runtime, 'where', inputs, `select(b, a, cond != ${zero})`, outShape, a.dtype));
  }

  reduce(op: ReduceOp, x: KernelTensor, axes: readonly number[]): Storage {
    return this.out(reduce(this.runtime, op, x, axes));
  }

  matmul(a: KernelTensor, b: KernelTensor, transA: boolean, transB: boolean, outShape: Shape): Storage {
    return this.out(matmul(this.runtime, a, b, transA, transB, outShape));
  }

  permute(x: KernelTensor, perm: readonly number[]): Storage {
    return this.out(move.permute(this.runtime, x, perm));
  }

  slice(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
    return this.out(move.slice(this.runtime, x, begin, outShape));
  }

  pad(x: KernelTensor, begin: readonly number[], outShape: Shape): Storage {
    return this.out(move.pad(this.runtime, x, begin, outShape));
  }

  concat(xs: readonly KernelTensor[], axis: number, outShape: Shape): Storage {
    return this.out(move.concat(this.runtime, xs, axis, outShape));
  }

  updateSlice(dst: KernelTensor, src: KernelTensor, begin: readonly number[], inPlace: boolean): Storage {
    const out = move.updateSlice(this.runtime, dst, src, begin, inPlace);
    return inPlace ? dst.storage : this.out(out);
  }

  gather(x: KernelTensor, indices: KernelTensor, axis: number): Storage {
    return this.out(gather(this.runtime, x, indices, axis));
  }

  scatterAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage {
    return this.out(scatterAdd(this.runtime, updates, indices, axis, outShape));
  }

  takeAlongAxis(x: KernelTensor, indices: KernelTensor, axis: number): Storage {
    return this.out(takeAlongAxis(this.runtime, x, indices, axis));
  }

  putAlongAxisAdd(updates: KernelTensor, indices: KernelTensor, axis: number, outShape: Shape): Storage {
    return this.out(putAlongAxisAdd(this.runtime, updates, indices, axis, outShape));
  }

  softmax(x: KernelTensor, axis: number, log: boolean): Storage {
    return this.out(softmax(this.runtime, x, axis, log));
  }

  rmsNorm(x: KernelTensor, weight: KernelTensor, eps: number): Storage {
    return this.out(rmsNorm(this.runtime, x, weight, eps));
  }

  rmsNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage] {
    const [dx, dw] = rmsNormBackward(this.runtime, x, weight, dy, eps);
    return [this.out(dx), this.out(dw)];
  }

  layerNorm(x: KernelTensor, weight: KernelTensor, bias: KernelTensor, eps: number): Storage {
    return this.out(layerNorm(this.runtime, x, weight, bias, eps));
  }

  layerNormBackward(x: KernelTensor, weight: KernelTensor, dy: KernelTensor, eps: number): [Storage, Storage, Storage] {
    const [dx, dw, db] = layerNormBackward(this.runtime, x, weight, dy, eps);
    return [this.out(dx), this.out(dw), this.out(db)];
  }

  adamw(
    param: KernelTensor,
    grad: KernelTensor,
    m: KernelTensor,
    v: KernelTensor,
    hyper: AdamWHyper,
  ): [Storage, Storage, Storage] {
    const [p1, m1, v1] = adamw(this.runtime, param, grad, m, v, hyper);
    return [this.out(p1), this.out(m1), this.out(v1)];
  }

  attention(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    scale: number,
    keyLength: number,
  ): Storage {
    return this.out(attention(this.runtime, q, k, v, keyBias, scale, keyLength));
  }

  attentionBackward(
    q: KernelTensor,
    k: KernelTensor,
    v: KernelTensor,
    keyBias: KernelTensor | null,
    out: KernelTensor,
    dOut: KernelTensor,
    scale: number,
  ): [Storage, Storage, Storage] {
    const [dq, dk, dv] = attentionBackward(this.runtime, q, k, v, keyBias, out, dOut, scale);
    return [this.out(dq), this.out(dk), this.out(dv)];
  }

  rope(xs: readonly KernelTensor[], cos: KernelTensor, sin: KernelTensor, inverse: boolean): Storage[] {
    return rope(this.runtime, xs, cos, sin, inverse).map((b) => this.out(b));
  }

  addRmsNorm(x: KernelTensor, delta: KernelTensor, weight: KernelTensor, eps: number): [Storage, Storage] {
    const [sum, y] = addRmsNorm(this.runtime, x, delta, weight, eps);
    return [this.out(sum), this.out(y)];
  }

  swiglu(gate: KernelTensor, up: KernelTensor): Storage {
    return this.out(swiglu(this.runtime, gate, up));
  }

  swigluBackward(gate: KernelTensor, up: KernelTensor, dy: KernelTensor): [Storage, Storage] {
    const [dGate, dUp] = swigluBackward(this.runtime, gate, up, dy);
    return [this.out(dGate), this.out(dUp)];
  }

  tokenLogProbs(logits: KernelTensor, targets: KernelTensor, scale: number): Storage {
    return this.out(tokenLogProbs(this.runtime, logits, targets, scale));
  }

  tokenLogProbsBackward(logits: KernelTensor, targets: KernelTensor, dy: KernelTensor, scale: number): Storage {
    return this.out(tokenLogProbs(this.runtime, logits, targets, scale, dy));
  }

  sumSquares(xs: readonly KernelTensor[]): Storage {
    return this.out(sumSquares(this.runtime, xs));
  }

  adamwMany(
    params: readonly KernelTensor[],
    grads: readonly KernelTensor[],
    m: readonly KernelTensor[],
    v: readonly KernelTensor[],
    sumSquares: KernelTensor | null,
    hyper: AdamWManyHyper,
  ): [Storage, Storage, Storage][] {
    const outs = adamwMany(this.runtime, params, grads, m, v, sumSquares, hyper);
    return outs.map(([p, m1, v1]) => [this.out(p), this.out(m1), this.out(v1)]);
  }
}

function toDType(values: TypedArray, dtype: DType): TypedArray {
  const out = allocArray(dtype, values.length);
  if (dtype === 'i32') for (let i = 0; i < values.length; i++) out[i] = Math.trunc(values[i]!);
  else out.set(values);
  return out;
}

/**
 * Acquire a WebGPU device (native backend first, then Mesa llvmpipe through OpenGL ES) and return a backend
 * on it. Throws `NoAdapterError` (naming what to install) when there is none; callers may fall back to the CPU.
 */
export async function createWebGpuBackend(opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const acquired = await acquireDevice(opts);
  return new WebGpuBackend(new GpuRuntime(acquired, opts));
}
