import {
  countReadBack,
  type Backend,
  type KernelTensor,
  type MemoryInfo,
  type RecordedStep,
  type Storage,
} from '../../core/backend.js';
import { isHalf, type DType, type HalfDType, type HostArray, type TypedArray } from '../../core/dtype.js';
import { widenHalf } from '../../core/half.js';
import { BackendError } from '../../core/errors.js';
import { sizeOf } from '../../core/shape.js';
import type { RuntimeStats } from './counters.js';
import type { AcquireOptions, AdapterDescription } from './device.js';
// Each kernel family registers its kernels for 'webgpu' when it loads (no fallback: a missing one is an error).
import './kernels/adamw.js';
import './kernels/attention.js';
import './kernels/elementwise.js';
import './kernels/fused.js';
import './kernels/indexing.js';
import './kernels/matmul.js';
import './kernels/movement.js';
import './kernels/multi-tensor.js';
import './kernels/norm.js';
import './kernels/reduce.js';
import './kernels/sampling.js';
import './kernels/softmax.js';
import { acquireDevice } from './platform.js';
import { GpuRuntime, type RuntimeOptions } from './runtime.js';
import { recordStep } from './record-step.js';
import type { PyTree } from '../../core/pytree.js';
import { asStorage, gpuStorage } from './storage.js';
import { wgslType } from './wgsl.js';

export interface WebGpuBackendOptions extends AcquireOptions, RuntimeOptions {
  /** Whether the backend offers `record` (`recordStep`), which the trainer uses for its warm-start step (default true). */
  readonly recordSteps?: boolean;
}

/**
 * The WebGPU backend: the device and its memory. Its kernels, WGSL compute shaders run through Dawn, are
 * registered for `'webgpu'` by the files of `kernels/` (every kernel of `core/kernels.ts`; no fallback).
 * Kernels encode work and return at once (`synchronous` is false); `read()` is the only way back to the host.
 * Storage is f32 or i32 (f64 is CPU-only), or bf16/f16 packed two to a u32 word (element 2i in the low half, an
 * odd count padded to a whole word), which the kernels that read it unpack in the shader. Create it with
 * `createWebGpuBackend()`, and `dispose()` it so the device is destroyed and the process can exit.
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

  readonly record?: <I, O>(fn: (inputs: I) => O, example: I) => RecordedStep<I, O>;

  constructor(
    readonly runtime: GpuRuntime,
    opts: Pick<WebGpuBackendOptions, 'recordSteps'> = {},
  ) {
    if (opts.recordSteps ?? true)
      this.record = <I, O>(fn: (inputs: I) => O, example: I): RecordedStep<I, O> =>
        recordStep(this, fn as unknown as (inputs: PyTree) => PyTree, example as PyTree) as RecordedStep<I, O>;
  }

  get adapter(): AdapterDescription {
    return this.runtime.adapter;
  }

  supportsDType(dtype: DType): boolean {
    return dtype === 'f32' || dtype === 'i32' || isHalf(dtype);
  }

  upload(values: HostArray, dtype: DType): Storage {
    if (isHalf(dtype)) return asStorage(this.runtime.upload(packHalves(values as Uint16Array)));
    wgslType('upload', dtype);
    const data =
      values.BYTES_PER_ELEMENT === 4 && (dtype === 'i32') === values instanceof Int32Array
        ? values
        : toDType(values, dtype);
    return asStorage(this.runtime.upload(data));
  }

  async read(x: KernelTensor): Promise<TypedArray> {
    const n = sizeOf(x.shape);
    if (isHalf(x.dtype)) {
      countReadBack(this, Math.ceil(n / 2) * 4);
      const bytes = await this.runtime.read(gpuStorage(x.storage).buffer, Math.ceil(n / 2) * 4);
      return widenHalf(x.dtype as HalfDType, new Uint16Array(bytes, 0, n));
    }
    wgslType('read', x.dtype);
    countReadBack(this, n * 4);
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
}

function toDType(values: HostArray, dtype: DType): TypedArray {
  const out = dtype === 'i32' ? new Int32Array(values.length) : new Float32Array(values.length);
  if (dtype === 'i32') for (let i = 0; i < values.length; i++) out[i] = Math.trunc(values[i]!);
  else out.set(values);
  return out;
}

/** bf16/f16 words as the shaders read them: two per u32 (little-endian, so word i's low half is element 2i). */
function packHalves(words: Uint16Array): Uint16Array {
  if (words.length % 2 === 0 && words.byteOffset % 4 === 0) return words;
  const out = new Uint16Array(words.length + (words.length % 2));
  out.set(words);
  return out;
}

/**
 * Acquire a WebGPU device (native backend first, then Mesa llvmpipe through OpenGL ES) and return a backend
 * on it. Throws `NoAdapterError` (naming what to install) when there is none; callers may fall back to the CPU.
 */
export async function createWebGpuBackend(opts: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const acquired = await acquireDevice(opts);
  const runtime = new GpuRuntime(acquired, opts);
  await runtime.tuner.load();
  return new WebGpuBackend(runtime, opts);
}
