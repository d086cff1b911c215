import type { Backend } from '../../core/backend.js';
import { BackendError, type RlvrError } from '../../core/errors.js';
import { BufferPool, type PoolStats } from './buffer-pool.js';
import type { AcquiredDevice, AdapterDescription } from './device.js';
import { DeviceLostError, GpuValidationError } from './errors.js';
import { PipelineCache, type CachedPipeline, type KernelSpec } from './pipelines.js';
import { KernelProfiler, type KernelTime } from './profiler.js';
import { Tuner, type TunerOptions } from './tuner.js';
import { UniformStore, type UniformSlot } from './uniforms.js';

/**
 * The command runtime: one long-lived command encoder and compute pass collect dispatches, submitted every
 * `dispatchesPerSubmit` dispatches or when a read needs the results. Everything done between two submits runs
 * inside one validation and one out-of-memory error scope (two pushes and two pops per submit, nothing per
 * dispatch); their verdicts, the pipelines' own scopes, the `uncapturederror` listener and `device.lost` all end
 * in one sticky typed error that names the kernel and is thrown by the next `read()` and every later call.
 * Nothing fails silently.
 *
 * Per dispatch the host work is small: uniforms are slots looked up by content (`uniforms.ts`), bind groups are
 * cached by (pipeline, buffers, uniform slot), and buffers come from the pool (`buffer-pool.ts`), which hands
 * kernels buffers freed earlier in the same batch. Kernels launch through `launch.ts`, which calls `dispatch`.
 */
export interface RuntimeOptions extends TunerOptions {
  /** Dispatches encoded before a submit (default 32). */
  readonly dispatchesPerSubmit?: number;
  /** Idle bytes above which the buffer pool destroys buffers unused for a few reads (default 512 MiB). */
  readonly maxIdleBytes?: number;
  /**
   * Whether the adapter is a CPU rasterizer (llvmpipe, lavapipe, SwiftShader), which picks kernels that do
   * not stage data in workgroup memory. Default: detected from the adapter's description.
   */
  readonly cpuLike?: boolean;
  /**
   * Per-kernel GPU times from `timestamp-query` (one pass per dispatch), where the device has the feature.
   * Default: the environment variable RLVR_PROFILE=1.
   */
  readonly profile?: boolean;
}

export interface Dispatch extends KernelSpec {
  /** Storage buffers in binding order (the uniform, if the kernel has one, is the last binding). */
  readonly buffers: readonly GPUBuffer[];
  readonly uniforms?: Uint32Array;
  readonly workgroups: readonly [number, number, number];
}

/**
 * What a kernel registered for 'webgpu' gets as its backend (`WebGpuBackend` is one): a backend whose kernels
 * encode on this runtime. Typed here, below the backend class, so the kernel files need not import backend.ts,
 * which imports them to register them.
 */
export interface GpuBackend extends Backend {
  readonly runtime: GpuRuntime;
}

/** What the runtime counts, for tests (asserted) and benchmarks (printed). */
export interface RuntimeCounters {
  readonly dispatches: number;
  readonly submits: number;
  /** `createBuffer` calls made by the runtime (tensor pool, staging, uniform arenas, profiling). */
  readonly buffersCreated: number;
  /** Bytes written from the host with `queue.writeBuffer` for tensor uploads (uniforms not included). */
  readonly uploadedBytes: number;
  /** Bind groups created (a cache miss each). */
  readonly bindGroupsCreated: number;
  /**
   * Round trips to the host: submits whose results the host waited on through `read` (reads asked for in one
   * turn share one). A training step's budget is one, at its end (loss and metrics); a decode step's one.
   */
  readonly readBacks: number;
}

export type RuntimeStats = PoolStats & RuntimeCounters & { pipelines: number };

/** Cached bind groups kept before the cache is cleared (a bound on what a changing workload can pin). */
const MAX_BIND_GROUPS = 16_384;

const envProfile = (): boolean => typeof process !== 'undefined' && process.env?.RLVR_PROFILE === '1';

export class GpuRuntime {
  readonly device: GPUDevice;
  readonly adapter: AdapterDescription;
  /**
   * Held for the device's lifetime: Dawn aborts if the instance is collected while its device lives (device.ts
   * also keeps one instance per path for the whole process).
   */
  // biome-ignore lint/correctness/noUnusedPrivateClassMembers: held, never read, so the instance outlives the device
  private instance: Pick<AcquiredDevice, 'gpu' | 'gpuAdapter'> | null;
  readonly pool: BufferPool;
  readonly pipelines: PipelineCache;
  private readonly staging: BufferPool;
  private readonly uniforms: UniformStore;
  private readonly profiler: KernelProfiler | null;
  private readonly mapRead: number;
  private readonly usage: { QUERY_RESOLVE: number; COPY_SRC: number; MAP_READ: number; COPY_DST: number };
  private readonly perSubmit: number;
  readonly maxWorkgroupsPerDim: number;
  readonly cpuLike: boolean;
  /** The kernels' tuned configurations per shape class (tuner.ts); its jobs run at the next wait for the device. */
  readonly tuner: Tuner;

  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  /** What the current pass has bound, so an unchanged pipeline or bind group is not set again. */
  private passPipeline: GPUComputePipeline | null = null;
  private passBindGroup: GPUBindGroup | null = null;
  private scopeOpen = false;
  private batchKernels = new Set<string>();
  private dispatches = 0;
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private bindGroupGeneration = 0;
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 0;
  private readonly checks = new Set<Promise<void>>();
  private failure: RlvrError | null = null;
  private lastKernel = '(none)';
  private destroyed = false;
  private readonly perKernel = new Map<string, number>();
  private counts = {
    dispatches: 0,
    submits: 0,
    buffersCreated: 0,
    uploadedBytes: 0,
    bindGroupsCreated: 0,
    readBacks: 0,
  };
  /** The submit that carries this turn's read copies (see `read`), while one is due. */
  private readTurn: Promise<void> | null = null;

  constructor(acquired: AcquiredDevice, opts: RuntimeOptions = {}) {
    this.device = acquired.device;
    this.adapter = acquired.adapter;
    this.instance = { gpu: acquired.gpu, gpuAdapter: acquired.gpuAdapter };
    const u = acquired.globals.GPUBufferUsage;
    this.usage = {
      QUERY_RESOLVE: (u as unknown as Record<string, number>).QUERY_RESOLVE ?? 0x200,
      COPY_SRC: u.COPY_SRC,
      MAP_READ: u.MAP_READ,
      COPY_DST: u.COPY_DST,
    };
    this.mapRead = acquired.globals.GPUMapMode.READ;
    this.perSubmit = opts.dispatchesPerSubmit ?? 32;
    this.maxWorkgroupsPerDim = this.device.limits.maxComputeWorkgroupsPerDimension;
    this.cpuLike = opts.cpuLike ?? /llvmpipe|lavapipe|softpipe|swiftshader/i.test(acquired.adapter.summary);
    const tensorUsage = u.STORAGE | u.COPY_SRC | u.COPY_DST;
    this.pool = new BufferPool(
      (size) => this.createBuffer(size, tensorUsage, 'rlvr:tensor'),
      opts.maxIdleBytes ?? 512 * 2 ** 20,
    );
    this.staging = new BufferPool(
      (size) => this.createBuffer(size, u.MAP_READ | u.COPY_DST, 'rlvr:staging'),
      64 * 2 ** 20,
    );
    const align = Math.max(16, this.device.limits.minUniformBufferOffsetAlignment);
    this.uniforms = new UniformStore((size) => this.createBuffer(size, u.UNIFORM | u.COPY_DST, 'rlvr:uniforms'), align);
    this.profiler =
      (opts.profile ?? envProfile()) && KernelProfiler.supported(this.device)
        ? new KernelProfiler(
            this.device,
            (size, usage, label) => this.createBuffer(size, usage, label),
            {
              queryResolve: (u as unknown as Record<string, number>).QUERY_RESOLVE ?? 0x200,
              copySrc: u.COPY_SRC,
              copyDst: u.COPY_DST,
              mapRead: u.MAP_READ,
              mapModeRead: this.mapRead,
            },
            this.perSubmit,
          )
        : null;
    this.tuner = new Tuner(
      acquired.adapter.summary,
      this.device.features.has('timestamp-query') ? 'timestamp-query' : 'wall-clock',
      opts,
    );
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

  /** Every GPU buffer the runtime makes goes through here, so `buffersCreated` counts them all. */
  private createBuffer(size: number, usage: number, label: string): GPUBuffer {
    this.counts.buffersCreated++;
    return this.device.createBuffer({ size, usage, label });
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
    const infra = ['batch', 'uniforms', 'tensor', 'staging', 'read', 'profile'];
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
        for (const e of [v, o])
          if (e) this.fail(new GpuValidationError(this.kernelIn(e.message, kernels), e.message, kindOf(e)));
      }),
    );
  }

  private track(p: Promise<void>): void {
    const q = p
      .catch((e: unknown) => this.fail(new GpuValidationError(this.lastKernel, String(e))))
      .finally(() => this.checks.delete(q));
    this.checks.add(q);
  }

  /** A storage buffer of at least `bytes` for a kernel to write (it may be one freed earlier in this batch). */
  alloc(bytes: number): GPUBuffer {
    this.check();
    this.openScope();
    return this.pool.acquire(bytes);
  }

  /** A new storage buffer holding `data` (never one that unsubmitted commands still read). */
  upload(data: ArrayBufferView): GPUBuffer {
    this.check();
    this.openScope();
    const buffer = this.pool.acquire(data.byteLength, true);
    if (data.byteLength > 0) this.write(buffer, data);
    return buffer;
  }

  /** Return a buffer to the pool. */
  release(buffer: GPUBuffer): void {
    this.pool.release(buffer);
  }

  /**
   * Write host data into a buffer. A buffer that a kernel of the unsubmitted batch was given may still be read
   * or written by those commands, which run after any `writeBuffer`: the batch is submitted first.
   */
  write(buffer: GPUBuffer, data: ArrayBufferView): void {
    this.check();
    if (this.pool.uploadMustWait(buffer)) this.flush();
    this.openScope();
    this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    this.counts.uploadedBytes += data.byteLength;
  }

  /** Encode one dispatch (the lower-level call under `launch()`; kernels should use `launch()`). */
  dispatch(d: Dispatch): void {
    this.check();
    this.openScope();
    const cached = this.pipelines.get(d);
    this.lastKernel = d.kernel;
    this.batchKernels.add(d.kernel);
    const given = d.buffers.length + (d.uniforms ? 1 : 0);
    if (given !== d.bindings.length) {
      throw new BackendError(
        'webgpu',
        `kernel ${d.kernel}: ${given} bindings given, its layout has ${d.bindings.length}`,
      );
    }
    const bindGroup = this.bindGroup(cached, d.buffers, d.uniforms ? this.uniforms.slot(d.uniforms) : null);
    if (this.profiler?.full) this.flush();
    this.encoder ??= this.device.createCommandEncoder({ label: 'rlvr:batch' });
    if (this.profiler) {
      this.pass?.end();
      this.pass = this.encoder.beginComputePass(this.profiler.pass(d.kernel));
      this.passPipeline = this.passBindGroup = null;
    }
    if (!this.pass) {
      this.pass = this.encoder.beginComputePass({ label: 'rlvr:batch' });
      this.passPipeline = this.passBindGroup = null;
    }
    // Consecutive dispatches of one kernel (AdamW over every leaf, a chain of adds) skip the repeated state.
    if (this.passPipeline !== cached.pipeline) {
      this.passPipeline = cached.pipeline;
      this.pass.setPipeline(cached.pipeline);
    }
    if (this.passBindGroup !== bindGroup) {
      this.passBindGroup = bindGroup;
      this.pass.setBindGroup(0, bindGroup);
    }
    this.pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    this.counts.dispatches++;
    this.perKernel.set(d.kernel, (this.perKernel.get(d.kernel) ?? 0) + 1);
    if (++this.dispatches >= this.perSubmit) this.flush();
  }

  private bindGroup(cached: CachedPipeline, buffers: readonly GPUBuffer[], uniform: UniformSlot | null): GPUBindGroup {
    if (this.bindGroupGeneration !== this.uniforms.generation) {
      // The uniform store was recycled: bind groups naming its old slots can never be hit again.
      this.bindGroups.clear();
      this.bindGroupGeneration = this.uniforms.generation;
    }
    let key = cached.cacheKey;
    for (const b of buffers) key += `,${this.idOf(b)}`;
    if (uniform) key += `|${uniform.id}`;
    const hit = this.bindGroups.get(key);
    if (hit) return hit;
    const entries: GPUBindGroupEntry[] = buffers.map((buffer, binding) => ({ binding, resource: { buffer } }));
    if (uniform) entries.push({ binding: entries.length, resource: uniform.binding });
    const group = this.device.createBindGroup({ layout: cached.layout, entries, label: cached.label });
    this.counts.bindGroupsCreated++;
    if (this.bindGroups.size >= MAX_BIND_GROUPS) this.bindGroups.clear();
    this.bindGroups.set(key, group);
    return group;
  }

  private idOf(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) {
      id = this.nextBufferId++;
      this.bufferIds.set(buffer, id);
    }
    return id;
  }

  /** Submit everything encoded so far; buffers released so far become reusable by uploads too. */
  flush(): void {
    if (this.destroyed) return;
    if (this.encoder) {
      this.pass?.end();
      this.pass = null;
      const collect = this.profiler?.resolve(this.encoder) ?? null;
      this.uniforms.upload(this.device.queue);
      this.device.queue.submit([this.encoder.finish({ label: 'rlvr:batch' })]);
      this.counts.submits++;
      this.encoder = null;
      collect?.();
    }
    this.uniforms.afterSubmit();
    this.dispatches = 0;
    this.closeScope();
    this.pool.afterSubmit();
  }

  /**
   * Read `byteLength` bytes of a buffer back to the host, after everything encoded before it. The copy is
   * encoded at once (in the open command encoder, so work encoded later cannot overwrite the buffer first), but
   * submitted and mapped on the next microtask: reads asked for in the same turn (a sampled token's ids and
   * log-probs, a step's loss and metrics) share one submit and wait for the device once, one read-back.
   */
  async read(buffer: GPUBuffer, byteLength: number): Promise<ArrayBuffer> {
    this.check();
    if (byteLength === 0) {
      this.flush();
      await this.settle();
      return new ArrayBuffer(0);
    }
    const staging = this.staging.acquire(byteLength);
    this.openScope();
    this.batchKernels.add('read');
    this.encoder ??= this.device.createCommandEncoder({ label: 'rlvr:batch' });
    this.pass?.end();
    this.pass = null;
    this.encoder.copyBufferToBuffer(buffer, 0, staging, 0, byteLength);
    this.readTurn ??= Promise.resolve().then(() => {
      this.readTurn = null;
      this.flush();
      this.counts.readBacks++;
    });
    await this.readTurn;
    // Shape classes met since the last wait are tuned now, after the work that met them (tuner.ts).
    if (this.tuner.due) await this.tuner.run();
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
    this.pool.endEpoch();
    await this.settle();
    return out;
  }

  /**
   * Milliseconds one run of `d` takes on the device, for the tuner (`tuner.ts`): `reps` runs in one compute
   * pass of their own, after everything before them has finished, timed by `timestamp-query` at the pass's
   * ends where the device has it, else by the wall clock from the submit to `onSubmittedWorkDone` (llvmpipe
   * has no timestamps). The first run goes the ordinary way, so the pipeline, uniform slot and bind group are
   * made, validated and counted as every other dispatch is.
   */
  async timeDispatch(d: Dispatch, reps: number): Promise<number> {
    this.dispatch(d);
    await this.sync();
    const cached = this.pipelines.get(d);
    const group = this.bindGroup(cached, d.buffers, d.uniforms ? this.uniforms.slot(d.uniforms) : null);
    this.uniforms.upload(this.device.queue);
    const stamps = this.device.features.has('timestamp-query') ? this.tuneStamps() : null;
    this.openScope();
    this.batchKernels.add(d.kernel);
    const encoder = this.device.createCommandEncoder({ label: 'rlvr:tune' });
    const pass = encoder.beginComputePass(
      stamps
        ? {
            label: `rlvr:${d.kernel}`,
            timestampWrites: { querySet: stamps.set, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
          }
        : { label: `rlvr:${d.kernel}` },
    );
    pass.setPipeline(cached.pipeline);
    pass.setBindGroup(0, group);
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    pass.end();
    if (stamps) {
      encoder.resolveQuerySet(stamps.set, 0, 2, stamps.resolve, 0);
      encoder.copyBufferToBuffer(stamps.resolve, 0, stamps.read, 0, 16);
    }
    const t0 = performance.now();
    this.device.queue.submit([encoder.finish()]);
    this.counts.submits++;
    this.counts.dispatches += reps;
    this.perKernel.set(d.kernel, (this.perKernel.get(d.kernel) ?? 0) + reps);
    this.closeScope();
    await this.device.queue.onSubmittedWorkDone();
    const wall = performance.now() - t0;
    await this.settle();
    if (!stamps) return wall / reps;
    await stamps.read.mapAsync(this.mapRead, 0, 16);
    const t = new BigUint64Array(stamps.read.getMappedRange(0, 16).slice(0));
    stamps.read.unmap();
    // A device may report timestamps that do not advance (quantised or reset): the wall clock then stands in.
    return t[1]! > t[0]! ? Number(t[1]! - t[0]!) / 1e6 / reps : wall / reps;
  }

  private stamps: { set: GPUQuerySet; resolve: GPUBuffer; read: GPUBuffer } | null = null;

  private tuneStamps(): { set: GPUQuerySet; resolve: GPUBuffer; read: GPUBuffer } {
    if (!this.stamps) {
      const u = this.usage;
      this.stamps = {
        set: this.device.createQuerySet({ type: 'timestamp', count: 2, label: 'rlvr:tune' }),
        resolve: this.createBuffer(16, u.QUERY_RESOLVE | u.COPY_SRC, 'rlvr:tune'),
        read: this.createBuffer(16, u.MAP_READ | u.COPY_DST, 'rlvr:tune'),
      };
    }
    return this.stamps;
  }

  /** Submit pending work and wait until it has run and every error check has come back; throws a recorded error. */
  async sync(): Promise<void> {
    this.check();
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.pool.endEpoch();
    await this.settle();
    if (this.tuner.due) await this.tuner.run();
  }

  private async settle(): Promise<void> {
    await this.pipelines.settled();
    while (this.checks.size > 0) await Promise.all([...this.checks]);
    this.check();
  }

  stats(): RuntimeStats {
    return { ...this.pool.stats(), ...this.counts, pipelines: this.pipelines.size };
  }

  /** Dispatches per kernel name since the runtime was made (or `resetKernelCounts`). */
  kernelCounts(): Map<string, number> {
    return new Map(this.perKernel);
  }

  resetKernelCounts(): void {
    this.perKernel.clear();
    this.profiler?.reset();
  }

  /** Whether per-kernel GPU times are being recorded (profiling on and `timestamp-query` available). */
  get profiling(): boolean {
    return this.profiler !== null;
  }

  /** Per-kernel GPU times recorded so far (null when not profiling); call after a sync. */
  async kernelTimes(): Promise<KernelTime[] | null> {
    return this.profiler ? this.profiler.table() : null;
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
    this.uniforms.destroy();
    this.profiler?.destroy();
    this.stamps?.set.destroy();
    this.bindGroups.clear();
    this.device.destroy();
    this.instance = null;
  }
}

function kindOf(e: GPUError): 'validation' | 'out-of-memory' | 'internal' {
  const name = e.constructor.name;
  return name.includes('OutOfMemory') ? 'out-of-memory' : name.includes('Internal') ? 'internal' : 'validation';
}
