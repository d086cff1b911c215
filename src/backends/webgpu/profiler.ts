/**
 * Per-kernel GPU time from `timestamp-query` (RLVR_PROFILE=1 or the runtime's `profile` option), where the
 * device has the feature. Each profiled dispatch gets its own compute pass whose begin/end timestamps land in a
 * query set; the runtime resolves the set into a buffer before each submit, and the times are read back
 * asynchronously and summed per kernel name. Profiling changes what it measures (one pass per dispatch, one
 * readback per submit), so it is off by default; dispatch counts per kernel are kept either way by the runtime.
 */
export interface KernelTime {
  readonly kernel: string;
  readonly dispatches: number;
  /** Summed GPU time, in milliseconds. */
  readonly gpuMs: number;
}

/** GPUBufferUsage and GPUMapMode flags for timestamp queries and their read-back. */
export interface QueryUsage {
  readonly queryResolve: number;
  readonly copySrc: number;
  readonly copyDst: number;
  readonly mapRead: number;
  readonly mapModeRead: number;
}

export class KernelProfiler {
  private readonly querySet: GPUQuerySet;
  private readonly resolveBuffer: GPUBuffer;
  private readonly readbacks: GPUBuffer[] = [];
  private kernels: string[] = [];
  private readonly times = new Map<string, { dispatches: number; ns: number }>();
  private readonly pendingReads = new Set<Promise<void>>();

  constructor(
    device: GPUDevice,
    private readonly create: (size: number, usage: number, label: string) => GPUBuffer,
    private readonly usage: QueryUsage,
    private readonly capacity: number,
  ) {
    this.querySet = device.createQuerySet({ type: 'timestamp', count: 2 * capacity, label: 'rlvr:profile' });
    this.resolveBuffer = create(16 * capacity, usage.queryResolve | usage.copySrc, 'rlvr:profile');
  }

  static supported(device: GPUDevice): boolean {
    return device.features.has('timestamp-query');
  }

  /** Whether the query set is full (the runtime then submits before the next dispatch). */
  get full(): boolean {
    return this.kernels.length >= this.capacity;
  }

  /** The descriptor of the pass for the next dispatch, which writes its begin and end timestamps. */
  pass(kernel: string): GPUComputePassDescriptor {
    const i = this.kernels.length;
    this.kernels.push(kernel);
    return {
      label: `rlvr:${kernel}`,
      timestampWrites: { querySet: this.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
    };
  }

  /** Before `encoder.finish()`: resolve this batch's timestamps and copy them to a buffer to map later. */
  resolve(encoder: GPUCommandEncoder): (() => void) | null {
    const n = this.kernels.length;
    if (n === 0) return null;
    const bytes = 16 * n;
    const readback =
      this.readbacks.pop() ?? this.create(16 * this.capacity, this.usage.mapRead | this.usage.copyDst, 'rlvr:profile');
    encoder.resolveQuerySet(this.querySet, 0, 2 * n, this.resolveBuffer, 0);
    encoder.copyBufferToBuffer(this.resolveBuffer, 0, readback, 0, bytes);
    const kernels = this.kernels;
    this.kernels = [];
    // Called after the submit: map and sum the times.
    return () => {
      const read = readback
        .mapAsync(this.usage.mapModeRead, 0, bytes)
        .then(() => {
          const t = new BigUint64Array(readback.getMappedRange(0, bytes).slice(0));
          readback.unmap();
          kernels.forEach((k, i) => {
            const ns = t[2 * i + 1]! >= t[2 * i]! ? Number(t[2 * i + 1]! - t[2 * i]!) : 0;
            const e = this.times.get(k) ?? { dispatches: 0, ns: 0 };
            e.dispatches++;
            e.ns += ns;
            this.times.set(k, e);
          });
        })
        .catch(() => undefined) // a device lost or destroyed mid-read: the runtime reports that itself
        .finally(() => {
          this.readbacks.push(readback);
          this.pendingReads.delete(read);
        });
      this.pendingReads.add(read);
    };
  }

  /** Wait for every batch's times, then the table by total time (largest first). */
  async table(): Promise<KernelTime[]> {
    while (this.pendingReads.size > 0) await Promise.all([...this.pendingReads]);
    return [...this.times]
      .map(([kernel, e]) => ({ kernel, dispatches: e.dispatches, gpuMs: e.ns / 1e6 }))
      .sort((a, b) => b.gpuMs - a.gpuMs);
  }

  reset(): void {
    this.times.clear();
  }

  destroy(): void {
    this.querySet.destroy();
    this.resolveBuffer.destroy();
    for (const b of this.readbacks) b.destroy();
  }
}
