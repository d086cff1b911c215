import type { QueryUsage } from './profiler.js';

/**
 * Where a span of work (a training step, say) spends its time, host and device: `GpuRuntime.startTimeline()`,
 * the work, then `await stopTimeline()`. The host side is clocked inside the runtime: time spent encoding
 * dispatches (pipeline and bind-group lookups, Dawn's encode calls), submitting (finish, uniform upload, submit),
 * and waiting for read-backs, against the span's wall time; what is left until the last submit is the caller's
 * JavaScript (building the graph, autodiff, kernel launch records). The device side, where the device has
 * `timestamp-query`, comes from a timestamp at the beginning and end of every compute pass: the passes' busy
 * time and the gaps between them, inside one submit and between submits. Kernels run back to back inside a pass,
 * so what a pass-level clock cannot see is idle time between dispatches of one pass (the barriers); the
 * per-kernel profiler (`RLVR_PROFILE=1`, one pass per dispatch) answers that at the price of changing it.
 */
export interface TimelineReport {
  readonly dispatches: number;
  readonly submits: number;
  readonly passes: number;
  /** Read-backs: submits whose results the host waited on. */
  readonly reads: number;
  /** From start to stop (the caller stops after its last read). */
  readonly wallMs: number;
  /** From start to the return of the last submit: the host's part of the span. */
  readonly untilLastSubmitMs: number;
  /** Inside `dispatch`, nested submits excluded. */
  readonly encodeMs: number;
  /** Inside submits (`flush`). */
  readonly submitMs: number;
  /** The longest single submit: one slow submit (Dawn freeing memory, say) from many slower ones. */
  readonly longestSubmitMs: number;
  /** From each read's submit until its bytes were on the host, summed. */
  readonly readWaitMs: number;
  /** The device's side, or null with `gpuNote` saying why it was not measured. */
  readonly gpu: GpuSpan | null;
  readonly gpuNote: string;
}

export interface GpuSpan {
  /** Summed duration of the passes. */
  readonly busyMs: number;
  /** From the first pass's beginning to the last one's end. */
  readonly spanMs: number;
  /** Gaps between passes of one submit (a read's copy, a timestamp between them). */
  readonly idleInSubmitMs: number;
  /** Gaps between the last pass of a submit and the first of the next. */
  readonly idleBetweenSubmitsMs: number;
  readonly measuredPasses: number;
}

/** Passes a span can timestamp (two queries each, within WebGPU's 4096 queries a set). */
const MAX_PASSES = 2048;

/**
 * A timestamp query set for `pairs` passes (a beginning and an end each), with the buffers its values are
 * resolved into and read back from. The timeline and the tuner's timing (`GpuRuntime.timeDispatch`) use one each.
 */
export class PassStamps {
  private readonly set: GPUQuerySet;
  private readonly resolved: GPUBuffer;
  private readonly readable: GPUBuffer;

  constructor(
    device: GPUDevice,
    create: (size: number, usage: number, label: string) => GPUBuffer,
    private readonly usage: QueryUsage,
    pairs: number,
    label: string,
  ) {
    this.set = device.createQuerySet({ type: 'timestamp', count: 2 * pairs, label });
    this.resolved = create(16 * pairs, usage.queryResolve | usage.copySrc, label);
    this.readable = create(16 * pairs, usage.mapRead | usage.copyDst, label);
  }

  /** The writes of pass `i`. */
  writes(i: number): GPUComputePassTimestampWrites {
    return { querySet: this.set, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 };
  }

  /** Encode the resolve of the first `n` passes' stamps (after their passes, in their submit or a later one). */
  resolve(encoder: GPUCommandEncoder, n: number): void {
    encoder.resolveQuerySet(this.set, 0, 2 * n, this.resolved, 0);
    encoder.copyBufferToBuffer(this.resolved, 0, this.readable, 0, 16 * n);
  }

  /** The first `n` passes' stamps (ns), once the resolve's submit has run. */
  async read(n: number): Promise<BigUint64Array> {
    await this.readable.mapAsync(this.usage.mapModeRead, 0, 16 * n);
    const t = new BigUint64Array(this.readable.getMappedRange(0, 16 * n).slice(0));
    this.readable.unmap();
    return t;
  }

  destroy(): void {
    this.set.destroy();
    this.resolved.destroy();
    this.readable.destroy();
  }
}

export class Timeline {
  private startedAt = 0;
  private lastSubmitAt = 0;
  private encodeMs = 0;
  private submitMs = 0;
  private longestSubmitMs = 0;
  private readWaitMs = 0;
  private dispatches = 0;
  private submits = 0;
  private reads = 0;
  /** The submit each timestamped pass belongs to; passes past the query set's capacity are counted only. */
  private passSubmits: number[] = [];
  private passes = 0;
  private nested = 0;
  private lastTurn = -1;
  private turnEnd = 0;
  private stamps: PassStamps | null = null;

  constructor(
    private readonly device: GPUDevice,
    private readonly create: (size: number, usage: number, label: string) => GPUBuffer,
    private readonly usage: QueryUsage,
    /** Why passes are not timestamped (no `timestamp-query`; the profiler owns the passes), or null. */
    private readonly noStamps: () => string | null,
  ) {}

  start(): void {
    this.startedAt = this.lastSubmitAt = performance.now();
    this.encodeMs = this.submitMs = this.longestSubmitMs = this.readWaitMs = 0;
    this.dispatches = this.submits = this.reads = this.passes = 0;
    this.passSubmits = [];
  }

  /** At the start of a `dispatch`: its clock. */
  beginDispatch(): number {
    this.nested = 0;
    return performance.now();
  }

  /** At its end: its time, less the submits it made (counted by `submitted`); `n` for a replayed recording's. */
  endDispatch(t0: number, n = 1): void {
    this.encodeMs += performance.now() - t0 - this.nested;
    this.nested = 0;
    this.dispatches += n;
  }

  /** Around one submit. */
  submitted(t0: number): void {
    const now = performance.now();
    this.submitMs += now - t0;
    this.longestSubmitMs = Math.max(this.longestSubmitMs, now - t0);
    this.nested += now - t0;
    this.lastSubmitAt = now;
    this.submits++;
  }

  /**
   * A read's bytes are on the host. Reads asked for in one turn share a submit (`turn`, the runtime's read-back
   * count): their wait is counted once, from that submit to the last of them.
   */
  readBack(turn: number, submittedAt: number): void {
    const now = performance.now();
    if (turn !== this.lastTurn) {
      this.lastTurn = turn;
      this.turnEnd = submittedAt;
      this.reads++;
    }
    if (now > this.turnEnd) {
      this.readWaitMs += now - this.turnEnd;
      this.turnEnd = now;
    }
  }

  /** The timestamp writes of a new pass (none past the capacity or without timestamps). */
  pass(): GPUComputePassTimestampWrites | undefined {
    this.passes++;
    if (this.noStamps() !== null || this.passSubmits.length >= MAX_PASSES) return undefined;
    this.stamps ??= new PassStamps(this.device, this.create, this.usage, MAX_PASSES, 'rlvr:timeline');
    const i = this.passSubmits.length;
    this.passSubmits.push(this.submits);
    return this.stamps.writes(i);
  }

  /**
   * The report, once every pass was submitted (the runtime flushes first): the timestamps are resolved in a
   * submit of their own after the span, so resolving costs the span nothing.
   */
  async stop(): Promise<TimelineReport> {
    const wallMs = performance.now() - this.startedAt;
    const host = {
      dispatches: this.dispatches,
      submits: this.submits,
      passes: this.passes,
      reads: this.reads,
      wallMs,
      untilLastSubmitMs: this.lastSubmitAt - this.startedAt,
      encodeMs: this.encodeMs,
      submitMs: this.submitMs,
      longestSubmitMs: this.longestSubmitMs,
      readWaitMs: this.readWaitMs,
    };
    const why = this.noStamps();
    if (why !== null) return { ...host, gpu: null, gpuNote: why };
    const n = this.passSubmits.length;
    if (n === 0 || !this.stamps) return { ...host, gpu: null, gpuNote: 'no pass was encoded' };
    const encoder = this.device.createCommandEncoder({ label: 'rlvr:timeline' });
    this.stamps.resolve(encoder, n);
    this.device.queue.submit([encoder.finish()]);
    const t = await this.stamps.read(n);
    const note = n < this.passes ? `${this.passes - n} passes past the first ${n} not timestamped` : '';
    return { ...host, gpu: gpuSpan(t, this.passSubmits), gpuNote: note };
  }

  destroy(): void {
    this.stamps?.destroy();
  }
}

/**
 * Busy time and gaps from pass timestamps `t` (begin, end per pass, in ns) and each pass's submit. A pass whose
 * end precedes its beginning (a device whose timestamps are not monotonic) counts as empty.
 */
export function gpuSpan(t: BigUint64Array, submitOf: readonly number[]): GpuSpan {
  let busy = 0;
  let inSubmit = 0;
  let between = 0;
  const n = submitOf.length;
  for (let i = 0; i < n; i++) {
    const [b, e] = [t[2 * i]!, t[2 * i + 1]!];
    busy += e > b ? Number(e - b) : 0;
    if (i === 0) continue;
    const prevEnd = t[2 * i - 1]!;
    const gap = b > prevEnd ? Number(b - prevEnd) : 0;
    if (submitOf[i] === submitOf[i - 1]) inSubmit += gap;
    else between += gap;
  }
  const first = t[0]!;
  const last = t[2 * n - 1]!;
  return {
    busyMs: busy / 1e6,
    spanMs: last > first ? Number(last - first) / 1e6 : 0,
    idleInSubmitMs: inSubmit / 1e6,
    idleBetweenSubmitsMs: between / 1e6,
    measuredPasses: n,
  };
}
