/**
 * GPU buffers recycled by size class. A buffer released while commands that use it may still be unsubmitted
 * (the op layer frees a tensor the moment its last reference goes, often right after encoding the kernel that
 * read it) waits in `pending` until the runtime has submitted those commands: only then can it be handed out
 * again, since a later upload (`queue.writeBuffer`) would otherwise land before the commands that read the old
 * contents. Idle buffers beyond `maxIdleBytes` are destroyed.
 */
export interface PoolStats {
  /** Buffers handed out and not yet released (what tensors hold). */
  readonly liveBuffers: number;
  readonly liveBytes: number;
  /** Released buffers waiting for the submit of the commands that last used them. */
  readonly pendingBuffers: number;
  /** Released buffers ready for reuse. */
  readonly idleBuffers: number;
  readonly idleBytes: number;
  /** Buffers ever created by this pool. */
  readonly created: number;
}

export class BufferPool {
  private readonly idle = new Map<number, GPUBuffer[]>();
  private pending: GPUBuffer[] = [];
  private live = 0;
  private liveBytes = 0;
  private idleCount = 0;
  private idleBytes = 0;
  private created = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly usage: number,
    private readonly label: string,
    private readonly maxIdleBytes: number,
  ) {}

  /** The allocation size for `bytes`: at least 16, a multiple of 16, within 25% of the request. */
  static sizeClass(bytes: number): number {
    const b = Math.max(16, bytes);
    const p = 2 ** Math.floor(Math.log2(b));
    const step = Math.max(16, p / 4);
    return Math.ceil(b / step) * step;
  }

  acquire(bytes: number): GPUBuffer {
    const size = BufferPool.sizeClass(bytes);
    const list = this.idle.get(size);
    let buffer = list?.pop();
    if (buffer) {
      this.idleCount--;
      this.idleBytes -= size;
    } else {
      buffer = this.device.createBuffer({ size, usage: this.usage, label: this.label });
      this.created++;
    }
    this.live++;
    this.liveBytes += size;
    return buffer;
  }

  /** Give a buffer back; it becomes reusable after the next submit (`afterSubmit`). */
  release(buffer: GPUBuffer): void {
    this.live--;
    this.liveBytes -= buffer.size;
    this.pending.push(buffer);
  }

  /** Called by the runtime once everything encoded so far has been submitted. */
  afterSubmit(): void {
    for (const buffer of this.pending) {
      if (this.idleBytes + buffer.size > this.maxIdleBytes) {
        buffer.destroy();
        continue;
      }
      let list = this.idle.get(buffer.size);
      if (!list) this.idle.set(buffer.size, (list = []));
      list.push(buffer);
      this.idleCount++;
      this.idleBytes += buffer.size;
    }
    this.pending = [];
  }

  stats(): PoolStats {
    return {
      liveBuffers: this.live,
      liveBytes: this.liveBytes,
      pendingBuffers: this.pending.length,
      idleBuffers: this.idleCount,
      idleBytes: this.idleBytes,
      created: this.created,
    };
  }

  /** Destroy the idle buffers (live ones die with the device). */
  trim(): void {
    for (const list of this.idle.values()) for (const b of list) b.destroy();
    this.idle.clear();
    this.idleCount = 0;
    this.idleBytes = 0;
  }
}
