import type { Backend } from '../../core/backend.js';
import { BackendError, type RlvrError } from '../../core/errors.js';
import { CommandBatch } from './batch.js';
import { BindGroupCache } from './bind-groups.js';
import { BufferPool } from './buffer-pool.js';
import { Counters, type RuntimeStats } from './counters.js';
import type { AcquiredDevice, AdapterDescription } from './device.js';
import { ErrorScopes } from './error-scopes.js';
import { GpuValidationError, RecordingError } from './errors.js';
import { PipelineCache, type KernelSpec } from './pipelines.js';
import { KernelProfiler, type KernelTime, type QueryUsage } from './profiler.js';
import { Recorder, type RecordedCommand, type Recording } from './recording.js';
import { PassStamps, Timeline, type TimelineReport } from './timeline.js';
import { Tuner, type TunerOptions } from './tuner.js';
import { UniformStore } from './uniforms.js';

/**
 * The command runtime: one long-lived command encoder and compute pass (`batch.ts`) collect dispatches,
 * submitted every `dispatchesPerSubmit` dispatches or when a read needs the results. Everything done between two
 * submits (or reads: `errorScopes`) runs inside one validation and one out-of-memory error scope
 * (`error-scopes.ts`), whose verdicts, with every other
 * failure, end in one sticky typed error that names the kernel and is thrown by the next `read()` and every
 * later call. Nothing fails silently.
 *
 * Per dispatch the host work is small: uniforms are slots looked up by content (`uniforms.ts`), bind groups are
 * cached by (pipeline, buffers, uniform slot) (`bind-groups.ts`), and buffers come from the pool
 * (`buffer-pool.ts`), which hands kernels buffers freed earlier in the same batch. What it does is counted
 * (`counters.ts`). Kernels launch through `launch.ts`, which calls `dispatch`.
 */
export interface RuntimeOptions extends TunerOptions {
  /** Dispatches encoded before a submit (default 32). */
  readonly dispatchesPerSubmit?: number;
  /**
   * How long one pair of error scopes stays open: `submit` (default) pushes and pops them around each submit,
   * `read` around everything between two read-backs (fewer pops; a failure then names every kernel of that span
   * unless Dawn's message names one). No difference measured in the step's time (an H100, 2026-11-28).
   */
  readonly errorScopes?: 'submit' | 'read';
  /**
   * Idle bytes above which the buffer pool, at a read after it created buffers, destroys those unused for a few
   * reads. Default: 512 MiB or the largest live bytes the pool has served, whichever is more (so an RL loop's
   * sampling does not destroy its training step's buffers); a number here is a fixed cap, for a device whose
   * memory is tight.
   */
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

/** How the runtime batches work unless told otherwise (`RuntimeOptions`). */
export const DEFAULT_BATCHING = { dispatchesPerSubmit: 32, errorScopes: 'submit' } as const satisfies RuntimeOptions;

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
  /** Swapped for the recording's own while a step is recorded (`beginRecording`). */
  private uniforms: UniformStore;
  private readonly makeUniforms: (maxArenas?: number) => UniformStore;
  private profiler: KernelProfiler | null = null;
  private readonly timeline: Timeline;
  private timing = false;
  private scopePerRead: boolean;
  private readonly mapRead: number;
  private readonly queryUsage: QueryUsage;
  private readonly make = (size: number, usage: number, label: string) => this.createBuffer(size, usage, label);
  private perSubmit: number;
  readonly maxWorkgroupsPerDim: number;
  readonly cpuLike: boolean;
  /** The kernels' tuned configurations per shape class (tuner.ts); its jobs run at the next wait for the device. */
  readonly tuner: Tuner;

  private readonly batch: CommandBatch;
  private bindGroups: BindGroupCache;
  /** What a step being recorded has encoded so far (null: not recording). */
  private recorder: Recorder | null = null;
  /** The runtime's own uniform store and bind groups while a recording's are in use. */
  private saved: { uniforms: UniformStore; bindGroups: BindGroupCache } | null = null;
  private readonly errors: ErrorScopes;
  private destroyed = false;
  private readonly counters = new Counters();
  private readonly counts = this.counters.counts;
  /** The submit that carries this turn's read copies (see `read`), while one is due. */
  private readTurn: Promise<void> | null = null;

  constructor(acquired: AcquiredDevice, opts: RuntimeOptions = {}) {
    this.device = acquired.device;
    this.adapter = acquired.adapter;
    this.instance = { gpu: acquired.gpu, gpuAdapter: acquired.gpuAdapter };
    const u = acquired.globals.GPUBufferUsage;
    this.mapRead = acquired.globals.GPUMapMode.READ;
    this.queryUsage = {
      queryResolve: (u as unknown as Record<string, number>).QUERY_RESOLVE ?? 0x200,
      copySrc: u.COPY_SRC,
      copyDst: u.COPY_DST,
      mapRead: u.MAP_READ,
      mapModeRead: this.mapRead,
    };
    this.perSubmit = opts.dispatchesPerSubmit ?? DEFAULT_BATCHING.dispatchesPerSubmit;
    this.maxWorkgroupsPerDim = this.device.limits.maxComputeWorkgroupsPerDimension;
    this.cpuLike = opts.cpuLike ?? /llvmpipe|lavapipe|softpipe|swiftshader/i.test(acquired.adapter.summary);
    const tensorUsage = u.STORAGE | u.COPY_SRC | u.COPY_DST;
    this.pool = new BufferPool(
      (size) => this.createBuffer(size, tensorUsage, 'rlvr:tensor'),
      opts.maxIdleBytes ?? 512 * 2 ** 20,
      opts.maxIdleBytes === undefined,
    );
    this.staging = new BufferPool(
      (size) => this.createBuffer(size, u.MAP_READ | u.COPY_DST, 'rlvr:staging'),
      64 * 2 ** 20,
    );
    const align = Math.max(16, this.device.limits.minUniformBufferOffsetAlignment);
    this.makeUniforms = (maxArenas?: number) =>
      new UniformStore((size) => this.createBuffer(size, u.UNIFORM | u.COPY_DST, 'rlvr:uniforms'), align, maxArenas);
    this.uniforms = this.makeUniforms();
    this.bindGroups = new BindGroupCache(this.device, this.uniforms, () => this.counts.bindGroupsCreated++);
    this.scopePerRead = (opts.errorScopes ?? DEFAULT_BATCHING.errorScopes) === 'read';
    this.timeline = new Timeline(this.device, this.make, this.queryUsage, () =>
      this.profiler
        ? 'the per-kernel profiler owns the passes'
        : this.device.features.has('timestamp-query')
          ? null
          : 'the device has no timestamp-query',
    );
    this.batch = new CommandBatch(this.device, () => ({
      perDispatch: this.profiler ? (kernel) => this.profiler!.pass(kernel) : null,
      perPass: () => (this.timing ? this.timeline.pass() : undefined),
    }));
    this.tuner = new Tuner(
      acquired.adapter.summary,
      this.device.features.has('timestamp-query') ? 'timestamp-query' : 'wall-clock',
      opts,
    );
    this.errors = new ErrorScopes(this.device, () => this.destroyed);
    // A failed pipeline is the root cause of the batch errors that follow it: it takes precedence.
    this.pipelines = new PipelineCache(this.device, (e) => this.errors.fail(e, true));
    if (opts.profile ?? envProfile()) this.setProfiling(true);
  }

  /**
   * Per-kernel GPU times on or off (where the device has `timestamp-query`; returns whether they are on). Work
   * encoded so far is submitted first, so no batch mixes profiled and ordinary passes.
   */
  setProfiling(on: boolean): boolean {
    if (on === (this.profiler !== null) || (on && !KernelProfiler.supported(this.device))) return this.profiling;
    this.flush();
    const old = this.profiler;
    this.profiler = on
      ? new KernelProfiler(this.device, this.make, this.queryUsage, Math.min(this.perSubmit, 1024))
      : null;
    // Its table goes with it, once its pending reads are done.
    if (old) void old.table().then(() => old.destroy());
    return this.profiling;
  }

  /** Change how work is batched (`RuntimeOptions`); what is encoded so far is submitted under the old settings. */
  configure(opts: Pick<RuntimeOptions, 'dispatchesPerSubmit' | 'errorScopes'>): void {
    this.check();
    this.flush('read');
    this.perSubmit = opts.dispatchesPerSubmit ?? this.perSubmit;
    this.scopePerRead = (opts.errorScopes ?? (this.scopePerRead ? 'read' : 'submit')) === 'read';
  }

  /** Start recording where the time goes (`timeline.ts`); everything encoded before is submitted first. */
  startTimeline(): void {
    this.check();
    this.flush();
    this.timing = true;
    this.timeline.start();
  }

  /** Stop recording (after the span's last read) and report; the device's side needs a read-back of its own. */
  async stopTimeline(): Promise<TimelineReport> {
    this.check();
    this.flush('read');
    this.timing = false;
    const report = await this.timeline.stop();
    await this.settle();
    return report;
  }

  /** Every GPU buffer the runtime makes goes through here, so `buffersCreated` counts them all. */
  private createBuffer(size: number, usage: number, label: string): GPUBuffer {
    this.counts.buffersCreated++;
    return this.device.createBuffer({ size, usage, label });
  }

  /** The first error recorded, if any (tests assert there is none). */
  get error(): RlvrError | null {
    return this.errors.error;
  }

  /** Throw the recorded error, if any; every entry point calls this first. */
  check(): void {
    const failure = this.errors.error;
    if (failure) throw failure;
    if (this.destroyed) throw new BackendError('webgpu', 'the backend was disposed');
  }

  /** A storage buffer of at least `bytes` for a kernel to write (it may be one freed earlier in this batch). */
  alloc(bytes: number): GPUBuffer {
    this.check();
    this.errors.open();
    return this.pool.acquire(bytes);
  }

  /** A new storage buffer holding `data` (never one that unsubmitted commands still read). */
  upload(data: ArrayBufferView): GPUBuffer {
    this.check();
    this.errors.open();
    // While a step is recorded, an upload gets a buffer of its own, held at once: no dispatch of the step wrote it
    // before or takes it after, so its contents stay from the recording run on and a replay need not put them back.
    const buffer = this.recorder ? this.pool.acquireNew(data.byteLength) : this.pool.acquire(data.byteLength, true);
    if (this.recorder) {
      this.pool.hold(buffer);
      this.recorder.uploadBuffers.push(buffer);
    }
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
    this.errors.open();
    this.device.queue.writeBuffer(buffer, 0, data.buffer, data.byteOffset, data.byteLength);
    this.counts.uploadedBytes += data.byteLength;
    this.recorder?.upload(buffer, data);
  }

  /** Encode a copy of `bytes` (a multiple of 4) from one buffer to another, after everything encoded so far. */
  copy(from: GPUBuffer, to: GPUBuffer, bytes: number): void {
    this.check();
    this.refuseWhileRecording('a buffer copy');
    this.errors.open();
    this.errors.note('copy');
    this.batch.forCopy().copyBufferToBuffer(from, 0, to, 0, bytes);
  }

  /** Encode one dispatch (the lower-level call under `launch()`; kernels should use `launch()`). */
  dispatch(d: Dispatch): void {
    const t0 = this.timing ? this.timeline.beginDispatch() : 0;
    this.check();
    this.errors.open();
    const cached = this.pipelines.get(d);
    this.errors.lastKernel = d.kernel;
    this.errors.note(d.kernel);
    const given = d.buffers.length + (d.uniforms ? 1 : 0);
    if (given !== d.bindings.length) {
      throw new BackendError(
        'webgpu',
        `kernel ${d.kernel}: ${given} bindings given, its layout has ${d.bindings.length}`,
      );
    }
    const bindGroup = this.bindGroups.get(cached, d.buffers, d.uniforms ? this.uniforms.slot(d.uniforms) : null);
    if (this.profiler?.full) this.flush();
    this.batch.dispatch(d.kernel, cached.pipeline, bindGroup, d.workgroups);
    this.recorder?.dispatch(d.kernel, cached.pipeline, bindGroup, d.workgroups, d.buffers, d.bindings);
    this.counters.dispatched(d.kernel);
    if (this.batch.dispatches >= this.perSubmit) this.flush();
    if (this.timing) this.timeline.endDispatch(t0);
  }

  /**
   * Submit everything encoded so far; buffers released so far become reusable by uploads too. A `read` (or a
   * sync) also closes the error scopes when they span reads (`errorScopes: 'read'`).
   */
  flush(reason: 'batch' | 'read' = 'batch'): void {
    if (this.destroyed) return;
    const t0 = this.timing ? performance.now() : 0;
    const encoder = this.batch.take();
    if (encoder) {
      const collect = this.profiler?.resolve(encoder) ?? null;
      this.uniforms.upload(this.device.queue);
      this.device.queue.submit([encoder.finish({ label: 'rlvr:batch' })]);
      this.counts.submits++;
      collect?.();
      if (this.timing) this.timeline.submitted(t0);
    }
    this.uniforms.afterSubmit();
    if (!this.scopePerRead || reason === 'read') this.errors.close();
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
    this.refuseWhileRecording('a read back to the host');
    if (byteLength === 0) {
      this.flush('read');
      await this.settle();
      return new ArrayBuffer(0);
    }
    const staging = this.staging.acquire(byteLength);
    this.errors.open();
    this.errors.note('read');
    this.batch.forCopy().copyBufferToBuffer(buffer, 0, staging, 0, byteLength);
    this.readTurn ??= Promise.resolve().then(() => {
      this.readTurn = null;
      this.flush('read');
      this.counts.readBacks++;
    });
    await this.readTurn;
    const [turn, submittedAt] = [this.counts.readBacks, performance.now()];
    // Shape classes met since the last wait are tuned now, after the work that met them (tuner.ts).
    if (this.tuner.due) await this.tuner.run();
    try {
      await staging.mapAsync(this.mapRead, 0, byteLength);
    } catch (e) {
      await this.settle();
      throw new GpuValidationError('read', `mapAsync failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (this.timing) this.timeline.readBack(turn, submittedAt);
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
    const group = this.bindGroups.get(cached, d.buffers, d.uniforms ? this.uniforms.slot(d.uniforms) : null);
    this.uniforms.upload(this.device.queue);
    const stamps = this.device.features.has('timestamp-query') ? this.tuneStamps() : null;
    this.errors.open();
    this.errors.note(d.kernel);
    const encoder = this.device.createCommandEncoder({ label: 'rlvr:tune' });
    const label = `rlvr:${d.kernel}`;
    const pass = encoder.beginComputePass(stamps ? { label, timestampWrites: stamps.writes(0) } : { label });
    pass.setPipeline(cached.pipeline);
    pass.setBindGroup(0, group);
    for (let i = 0; i < reps; i++) pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
    pass.end();
    stamps?.resolve(encoder, 1);
    const t0 = performance.now();
    this.device.queue.submit([encoder.finish()]);
    this.counts.submits++;
    this.counters.dispatched(d.kernel, reps);
    this.errors.close();
    await this.device.queue.onSubmittedWorkDone();
    const wall = performance.now() - t0;
    await this.settle();
    if (!stamps) return wall / reps;
    const t = await stamps.read(1);
    // A device may report timestamps that do not advance (quantised or reset): the wall clock then stands in.
    return t[1]! > t[0]! ? Number(t[1]! - t[0]!) / 1e6 / reps : wall / reps;
  }

  private stamps: PassStamps | null = null;

  private refuseWhileRecording(what: string): void {
    if (this.recorder) throw new RecordingError(`${what} inside a recorded step: it replays without the host`);
  }

  /**
   * Start recording the dispatches encoded from now on (`recording.ts`); they still run as usual. Uniform
   * blocks and bind groups go to stores of the recording's own until `endRecording` or `abortRecording`.
   */
  beginRecording(): void {
    this.check();
    if (this.recorder) throw new RecordingError('a step is already being recorded on this backend');
    this.flush();
    const uniforms = this.makeUniforms(Number.POSITIVE_INFINITY);
    const bindGroups = new BindGroupCache(this.device, uniforms, () => this.counts.bindGroupsCreated++);
    this.saved = { uniforms: this.uniforms, bindGroups: this.bindGroups };
    this.recorder = new Recorder(uniforms, bindGroups);
    this.uniforms = uniforms;
    this.bindGroups = bindGroups;
  }

  /** Whether a step is being recorded. */
  get recording(): boolean {
    return this.recorder !== null;
  }

  /** Stop recording; the recorder, with the runtime's own stores back in place. */
  private stopRecording(): Recorder {
    const recorder = this.recorder;
    if (!recorder || !this.saved) throw new RecordingError('no step is being recorded');
    this.flush();
    this.recorder = null;
    this.uniforms = this.saved.uniforms;
    this.bindGroups = this.saved.bindGroups;
    this.saved = null;
    return recorder;
  }

  /**
   * Stop recording and keep what a replay needs: every buffer the commands name and the `extra` ones (the input
   * slots and the outputs) held from the pool, and a held copy of each upload a replay must repeat, put back by a
   * copy command where the recording run uploaded it.
   */
  endRecording(extra: readonly GPUBuffer[]): Recording {
    const recorder = this.stopRecording();
    const repeat = recorder.uploadsToRepeat();
    const held = new Set([...recorder.buffers, ...extra]);
    for (const b of held) this.pool.hold(b);
    const commands: RecordedCommand[] = [];
    let next = 0;
    for (let i = 0; i <= recorder.commands.length; i++) {
      for (; next < repeat.length && repeat[next]!.at === i; next++) {
        const u = repeat[next]!;
        const constant = this.upload(u.data);
        this.pool.hold(constant);
        held.add(constant);
        commands.push({ kind: 'copy', from: constant, to: u.buffer, bytes: Math.ceil(u.data.byteLength / 4) * 4 });
      }
      if (i < recorder.commands.length) commands.push(recorder.commands[i]!);
    }
    const dispatches = recorder.commands.length;
    // The uploads' buffers were held once already (`upload`): a buffer appears here once per hold.
    const holds = [...held, ...recorder.uploadBuffers];
    return { commands, held: holds, uniforms: recorder.uniforms, dispatches, dropped: false };
  }

  /** Stop recording and keep nothing (the recorded function threw). */
  abortRecording(): void {
    const recorder = this.stopRecording();
    for (const b of recorder.uploadBuffers) this.pool.unhold(b);
    recorder.uniforms.destroy();
  }

  /**
   * Encode a recording again: first `inputs` (each [from, to, bytes]: a caller's tensor into the input slot the
   * recording read), then its commands, then each of `outputs` ([buffer, bytes, lent]): copied into a buffer of
   * the pool (the recording's own are written again by the next replay), or, lent, the buffer itself (an input
   * slot the function updated in place, handed out until the next replay takes it back). Returns them.
   */
  replay(
    rec: Recording,
    inputs: readonly (readonly [GPUBuffer, GPUBuffer, number])[],
    outputs: readonly (readonly [GPUBuffer, number, boolean])[],
  ): GPUBuffer[] {
    this.check();
    this.refuseWhileRecording('a replay');
    if (rec.dropped) throw new RecordingError('the recorded step was disposed');
    const t0 = this.timing ? this.timeline.beginDispatch() : 0;
    this.errors.open();
    this.errors.note('replay');
    for (const [from, to, bytes] of inputs) this.batch.forCopy().copyBufferToBuffer(from, 0, to, 0, bytes);
    for (const c of rec.commands) {
      if (c.kind === 'copy') {
        this.batch.forCopy().copyBufferToBuffer(c.from, 0, c.to, 0, c.bytes);
        continue;
      }
      this.errors.note(c.kernel);
      if (this.profiler?.full) {
        this.flush();
        this.errors.open();
      }
      this.batch.dispatch(c.kernel, c.pipeline, c.group, c.workgroups);
      this.counters.dispatched(c.kernel);
      if (this.batch.dispatches >= this.perSubmit) {
        this.flush();
        this.errors.open();
      }
    }
    const out = outputs.map(([from, bytes, lent]) => {
      if (lent) {
        this.pool.lend(from);
        return from;
      }
      const to = this.pool.acquire(bytes);
      this.batch.forCopy().copyBufferToBuffer(from, 0, to, 0, Math.ceil(bytes / 4) * 4);
      return to;
    });
    if (this.timing) this.timeline.endDispatch(t0, rec.dispatches);
    return out;
  }

  /** Let go of a recording's buffers (back to the pool) and uniform store; a later replay throws. */
  dropRecording(rec: Recording): void {
    if (rec.dropped) return;
    rec.dropped = true;
    for (const b of rec.held) this.pool.unhold(b);
    rec.uniforms.destroy();
  }

  private tuneStamps(): PassStamps {
    this.stamps ??= new PassStamps(this.device, this.make, this.queryUsage, 1, 'rlvr:tune');
    return this.stamps;
  }

  /** Submit pending work and wait until it has run and every error check has come back; throws a recorded error. */
  async sync(): Promise<void> {
    this.check();
    this.refuseWhileRecording('a wait for the device');
    this.flush('read');
    await this.device.queue.onSubmittedWorkDone();
    this.pool.endEpoch();
    await this.settle();
    if (this.tuner.due) await this.tuner.run();
  }

  private async settle(): Promise<void> {
    await this.pipelines.settled();
    await this.errors.settled();
    this.check();
  }

  stats(): RuntimeStats {
    return { ...this.pool.stats(), ...this.counts, pipelines: this.pipelines.size };
  }

  /** Dispatches per kernel name since the runtime was made (or `resetKernelCounts`). */
  kernelCounts(): Map<string, number> {
    return this.counters.kernelCounts();
  }

  resetKernelCounts(): void {
    this.counters.resetKernelCounts();
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
    this.batch.take()?.finish();
    this.errors.close();
    this.destroyed = true;
    this.pool.trim();
    this.staging.trim();
    this.uniforms.destroy();
    this.profiler?.destroy();
    this.timeline.destroy();
    this.stamps?.destroy();
    this.bindGroups.clear();
    this.device.destroy();
    this.instance = null;
  }
}
