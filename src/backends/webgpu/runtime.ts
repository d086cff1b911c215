import { BackendError, RlvrError } from '../../core/errors.js';
import { BufferPool, type PoolStats } from './buffer-pool.js';
import type { AcquiredDevice, AdapterDescription } from './device.js';
import { DeviceLostError, GpuValidationError } from './errors.js';
import { PipelineCache, type KernelSpec } from './pipelines.js';

/**
 * The command runtime: one long-lived command encoder and compute pass collect dispatches, submitted every
 * `dispatchesPerSubmit` dispatches or when a read needs the results. Everything done between two submits runs
 * inside one validation and one out-of-memory error scope; their verdicts, the pipelines' own scopes, the
 * `uncapturederror` listener and `device.lost` all end in one sticky typed error that names the kernel and is
 * thrown by the next `read()` and every later call. Nothing fails silently.
 */
export interface RuntimeOptions {
  /** Dispatches encoded before a submit (default 32). */
  readonly dispatchesPerSubmit?: number;
  /** Idle bytes the buffer pool keeps for reuse (default 512 MiB). */
  readonly maxIdleBytes?: number;
  /**
   * Whether the adapter is a CPU rasterizer (llvmpipe, lavapipe, SwiftShader), which picks kernels that do
   * not stage data in workgroup memory. Default: detected from the adapter's description.
   */
  readonly cpuLike?: boolean;
}

export interface Dispatch extends KernelSpec {
  /** Storage buffers in binding order (the uniform, if the kernel has one, is the last binding). */
  readonly buffers: readonly GPUBuffer[];
  readonly uniforms?: Uint32Array;
  readonly workgroups: readonly [number, number, number];
}

interface Arena {
  readonly gpu: GPUBuffer;
  readonly cpu: Uint8Array;
  used: number;
}

const ARENA_BYTES = 64 * 1024;

export class GpuRuntime {
  readonly device: GPUDevice;
  readonly adapter: AdapterDescription;
  /**
   * Held for the device's lifetime: Dawn aborts if the instance is collected while its device lives (device.ts
   * also keeps one instance per path for the whole process).
   */
  private instance: Pick<AcquiredDevice, 'gpu' | 'gpuAdapter'> | null;
  readonly pool: BufferPool;
  readonly pipelines: PipelineCache;
  private readonly staging: BufferPool;
  private readonly usage: AcquiredDevice['globals']['GPUBufferUsage'];
  private readonly mapRead: number;
  private readonly perSubmit: number;
  private readonly uniformAlign: number;
  readonly maxWorkgroupsPerDim: number;
  readonly cpuLike: boolean;

  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private scopeOpen = false;
  private batchKernels = new Set<string>();
  private dispatches = 0;
  private arenas: Arena[] = [];
  private freeArenas: Arena[] = [];
  private readonly checks = new Set<Promise<void>>();
  private failure: RlvrError | null = null;
  private lastKernel = '(none)';
  private destroyed = false;
  /** Dispatches encoded and submits made, for tests and benchmarks. */
  dispatchCount = 0;
  submitCount = 0;

  constructor(acquired: AcquiredDevice, opts: RuntimeOptions = {}) {
    this.device = acquired.device;
    this.adapter = acquired.adapter;
    this.instance = { gpu: acquired.gpu, gpuAdapter: acquired.gpuAdapter };
    this.usage = acquired.globals.GPUBufferUsage;
    this.mapRead = acquired.globals.GPUMapMode.READ;
    this.perSubmit = opts.dispatchesPerSubmit ?? 32;
    this.uniformAlign = Math.max(16, this.device.limits.minUniformBufferOffsetAlignment);
    this.maxWorkgroupsPerDim = this.device.limits.maxComputeWorkgroupsPerDimension;
    this.cpuLike = opts.cpuLike ?? /llvmpipe|lavapipe|softpipe|swiftshader/i.test(acquired.adapter.summary);
    const u = this.usage;
    this.pool = new BufferPool(this.device, u.STORAGE | u.COPY_SRC | u.COPY_DST, 'rlvr:tensor', opts.maxIdleBytes ?? 512 * 2 ** 20);
    this.staging = new BufferPool(this.device, u.MAP_READ | u.COPY_DST, 'rlvr:staging', 64 * 2 ** 20);
    // A failed pipeline is the root cause of the batch errors that follow it: it takes precedence.
    this.pipelines = new PipelineCache(this.device, (e) => this.fail(e, true));
    this.device.addEventListener('uncapturederror', (ev) => {
      const error = (ev as GPUUncapturedErrorEvent).error;
      this.fail(new GpuValidationError(this.kernelIn(error.message), error.message, kindOf(error)));
    });
    void this.device.lost.then((info) => {
      if (!this.destroyed) this.fail(new DeviceLostError(info.reason ?? 'unknown', info.message, this.lastKernel));
    });
  }

  /** The first error recorded, if any (tests assert there is none). */
  get error(): RlvrError | null {
    return this.failure;
  }

  /** Throw the recorded error, if any; every entry point calls this first. */
  check(): void {
    if (this.failure) throw this.failure;
    if (this.destroyed) throw new BackendError('webgpu', 'the backend was disposed');
  }

  private rootCause = false;

  private fail(e: RlvrError, root = false): void {
    if (this.failure && (this.rootCause || !root)) return;
    this.failure = e;
    this.rootCause = root;
  }

  /** The kernel a Dawn message names through our `rlvr:` labels, else the kernels of the current batch. */
  private kernelIn(message: string, fallback: Iterable<string> = this.batchKernels): string {
    const infra = ['batch', 'uniforms', 'tensor', 'staging', 'read'];
    const labels = [...message.matchAll(/rlvr:([^"\]\s]+)/g)].map((m) => m[1]!);
    const named = [...new Set(labels)].filter((k) => !k.startsWith('layout') && !infra.includes(k));
    if (named.length > 0) return named.join(', ');
    const batch = [...fallback];
    return batch.length > 0 ? `one of ${batch.join(', ')}` : this.lastKernel;
  }

  /** Open the batch's error scopes before the first device call of a batch. */
  private openScope(): void {
    if (this.scopeOpen) return;
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    this.scopeOpen = true;
  }

  private closeScope(): void {
    if (!this.scopeOpen) return;
    this.scopeOpen = false;
    const kernels = [...this.batchKernels];
    this.batchKernels = new Set();
    const validation = this.device.popErrorScope();
    const oom = this.device.popErrorScope();
    this.track(
      Promise.all([validation, oom]).then(([v, o]) => {
        for (const e of [v, o]) if (e) this.fail(new GpuValidationError(this.kernelIn(e.message, kernels), e.message, kindOf(e)));
      }),
    );
  }

  private track(p: Promise<void>): void {
    const q = p.catch((e: unknown) => this.fail(new GpuValidationError(this.lastKernel, String(e)))).finally(() => this.checks.delete(q));
    this.checks.add(q);
  }

  /** A storage buffer of at least `bytes` from the pool. */
  alloc(bytes: number): GPUBuffer {
    this.check();
    this.openScope();
    return this.pool.acquire(bytes);
  }

  /** Return a buffer to the pool (reused only after the commands using it are submitted). */
  release(buffer: GPUBuffer): void {
    this.pool.release(buffer);
  }

  write(buffer: GPUBuffer, data: ArrayBufferView): void {
    this.check();
    this.openScope();
    this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
  }

  dispatch(d: Dispatch): void {
    this.check();
    this.openScope();
    const cached = this.pipelines.get(d);
    this.lastKernel = d.kernel;
    this.batchKernels.add(d.kernel);
    const entries: GPUBindGroupEntry[] = d.buffers.map((buffer, binding) => ({ binding, resource: { buffer } }));
    if (d.uniforms) entries.push({ binding: entries.length, resource: this.uniformSlice(d.uniforms) });
    if (entries.length !== d.bindings.length) {
      throw new BackendError('webgpu', `kernel ${d.kernel}: ${entries.length} bindings given, its layout has ${d.bindings.length}`);
    }
    const bindGroup = this.device.createBindGroup({ layout: cached.layout, entries, label: cached.label });
    this.encoder ??= this.device.createCommandEncoder({ label: 'rlvr:batch' });
    this.pass ??= this.encoder.beginComputePass({ label: 'rlvr:batch' });
    this.pass.setPipeline(cached.pipeline);
    this.pass.setBindGroup(0, bindGroup);
    this.pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    this.dispatchCount++;
    if (++this.dispatches >= this.perSubmit) this.flush();
  }

  /** Copy words into this batch's uniform arena; the arena is uploaded just before the submit. */
  private uniformSlice(words: Uint32Array): GPUBufferBinding {
    const size = Math.ceil(words.byteLength / 16) * 16;
    let arena = this.arenas[this.arenas.length - 1];
    let offset = arena ? Math.ceil(arena.used / this.uniformAlign) * this.uniformAlign : 0;
    if (!arena || offset + size > ARENA_BYTES) {
      arena = this.freeArenas.pop() ?? {
        gpu: this.device.createBuffer({ size: ARENA_BYTES, usage: this.usage.UNIFORM | this.usage.COPY_DST, label: 'rlvr:uniforms' }),
        cpu: new Uint8Array(ARENA_BYTES),
        used: 0,
      };
      this.arenas.push(arena);
      offset = 0;
    }
    arena.cpu.set(new Uint8Array(words.buffer, words.byteOffset, words.byteLength), offset);
    arena.used = offset + size;
    return { buffer: arena.gpu, offset, size };
  }

  /** Submit everything encoded so far; released buffers become reusable. */
  flush(): void {
    if (this.destroyed) return;
    if (this.encoder) {
      this.pass?.end();
      this.pass = null;
      for (const a of this.arenas) this.device.queue.writeBuffer(a.gpu, 0, a.cpu.buffer, 0, a.used);
      this.device.queue.submit([this.encoder.finish({ label: 'rlvr:batch' })]);
      this.submitCount++;
      this.encoder = null;
    }
    for (const a of this.arenas) a.used = 0;
    this.freeArenas.push(...this.arenas);
    this.arenas = [];
    this.dispatches = 0;
    this.closeScope();
    this.pool.afterSubmit();
  }

  /** Read `byteLength` bytes of a buffer back to the host, after everything encoded before it. */
  async read(buffer: GPUBuffer, byteLength: number): Promise<ArrayBuffer> {
    this.check();
    this.flush();
    if (byteLength === 0) {
      await this.settle();
      return new ArrayBuffer(0);
    }
    const staging = this.staging.acquire(byteLength);
    this.openScope();
    this.batchKernels.add('read');
    const encoder = this.device.createCommandEncoder({ label: 'rlvr:read' });
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, byteLength);
    this.device.queue.submit([encoder.finish()]);
    this.submitCount++;
    this.closeScope();
    try {
      await staging.mapAsync(this.mapRead, 0, byteLength);
    } catch (e) {
      await this.settle();
      throw new GpuValidationError('read', `mapAsync failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    const out = staging.getMappedRange(0, byteLength).slice(0);
    staging.unmap();
    this.staging.release(staging);
    this.staging.afterSubmit();
    await this.settle();
    return out;
  }

  /** Submit pending work and wait until it has run and every error check has come back; throws a recorded error. */
  async sync(): Promise<void> {
    this.check();
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    await this.settle();
  }

  private async settle(): Promise<void> {
    await this.pipelines.settled();
    while (this.checks.size > 0) await Promise.all([...this.checks]);
    this.check();
  }

  stats(): PoolStats & { pipelines: number; dispatches: number; submits: number } {
    return { ...this.pool.stats(), pipelines: this.pipelines.size, dispatches: this.dispatchCount, submits: this.submitCount };
  }

  destroy(): void {
    if (this.destroyed) return;
    if (this.encoder) {
      this.pass?.end();
      this.encoder.finish();
    }
    this.closeScope();
    this.destroyed = true;
    this.pool.trim();
    this.staging.trim();
    this.device.destroy();
    this.instance = null;
  }
}

function kindOf(e: GPUError): 'validation' | 'out-of-memory' | 'internal' {
  const name = e.constructor.name;
  return name.includes('OutOfMemory') ? 'out-of-memory' : name.includes('Internal') ? 'internal' : 'validation';
}
