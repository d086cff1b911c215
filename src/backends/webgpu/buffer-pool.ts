/**
 * GPU buffers recycled by size class. The op layer frees a tensor the moment its last reference goes, often
 * right after encoding the kernel that read it, while those commands are still unsubmitted. Such a buffer is
 * `pending` until the runtime submits: a later kernel may write it at once (commands in one command buffer run
 * in order, so the reads encoded before come first), but a host upload may not (`queue.writeBuffer` lands on the
 * queue before the unsubmitted commands that read the old contents), so uploads take only `idle` buffers.
 *
 * Nothing is destroyed on release. At a sync point (`endEpoch`, called on every read), if the pool created a buffer
 * since the last one and the idle bytes exceed the cap, idle buffers nobody acquired during the last few epochs are
 * destroyed: a working set that repeats every training step is never destroyed and created again, however large it
 * is, and while no buffer is created the pool holds no more than it did at its last creation. The cap is
 * `maxIdleBytes`, or with `followPeak` (the runtime's default) at least the largest live bytes the pool has served:
 * an RL loop whose training step outgrows a fixed cap destroys that step's buffers while it samples (a read per
 * token) and creates them again (the trainer on webgpu under a fixed 64 KiB cap: about 240 buffers a step), so idle
 * memory may hold one working set's worth, as a caching allocator's does. Destroying is not free on a GPU: Dawn
 * frees the memory inside a later submit (an H200: one submit of 280-350 ms after the pool destroyed a
 * 0.6B-parameter model's idle buffers).
 */
export interface PoolStats {
  /** Buffers handed out and not yet released (what tensors hold). */
  readonly liveBuffers: number;
  readonly liveBytes: number;
  /** Released buffers whose last readers are not submitted yet (kernel outputs may reuse them, uploads not). */
  readonly pendingBuffers: number;
  /** Released buffers ready for any reuse. */
  readonly idleBuffers: number;
  readonly idleBytes: number;
  /** Buffers ever created by this pool. */
  readonly created: number;
  /** Buffers this pool destroyed because they sat idle past the cap. */
  readonly destroyed: number;
  /** Buffers kept for recorded steps (`hold`), live or not, and their bytes. */
  readonly heldBuffers: number;
  readonly heldBytes: number;
}

/** Epochs (reads) an idle buffer may go unused before it can be destroyed to bring idle bytes under the cap. */
const KEEP_EPOCHS = 4;

/** What the pool knows of a buffer it made: kept beside it, so no native getter or lookup runs per call. */
interface PoolEntry {
  readonly buffer: GPUBuffer;
  readonly size: number;
  /** Creation order: the free lists' sort key. */
  readonly serial: number;
  /** The epoch it was last handed out in. */
  lastUse: number;
  /** Recorded steps holding it (`hold`): while any does, a release keeps it out of the free lists. */
  holds: number;
  /** Released while held: free as far as tensors go, but a recorded step still uses it. */
  heldFree: boolean;
}

/** Where an entry of creation order `serial` goes in a list sorted by serial, descending (binary search). */
function placeOf(list: readonly PoolEntry[], serial: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]!.serial > serial) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Free buffers by size; each size's list is kept in decreasing creation order, so `pop` hands out the oldest
 * free buffer. Which buffer a kernel gets then depends only on which ones are free, not on the order they were
 * released in: the same step run again gets the same buffers, and its bind groups come from the cache.
 */
class SizeClasses {
  private readonly lists = new Map<number, PoolEntry[]>();
  count = 0;
  bytes = 0;

  push(entry: PoolEntry): void {
    let list = this.lists.get(entry.size);
    if (!list) {
      list = [];
      this.lists.set(entry.size, list);
    }
    const lo = placeOf(list, entry.serial);
    if (lo === list.length) list.push(entry);
    else list.splice(lo, 0, entry);
    this.count++;
    this.bytes += entry.size;
  }

  pop(size: number): PoolEntry | undefined {
    const entry = this.lists.get(size)?.pop();
    if (entry) {
      this.count--;
      this.bytes -= size;
    }
    return entry;
  }

  /** Every entry for which `keep` holds, left in place. */
  list(keep: (e: PoolEntry) => boolean): PoolEntry[] {
    return [...this.lists.values()].flatMap((list) => list.filter(keep));
  }

  /** Remove `entry` if it is here; whether it was. */
  take(entry: PoolEntry): boolean {
    const at = this.indexOf(entry);
    if (at < 0) return false;
    this.lists.get(entry.size)!.splice(at, 1);
    this.count--;
    this.bytes -= entry.size;
    return true;
  }

  /** Where `entry` is in its size's list (sorted by serial, descending), or -1. */
  private indexOf(entry: PoolEntry): number {
    const list = this.lists.get(entry.size);
    if (!list) return -1;
    const at = placeOf(list, entry.serial);
    return list[at] === entry ? at : -1;
  }

  /** Remove and return every entry for which `drop` holds. */
  removeWhere(drop: (e: PoolEntry) => boolean): PoolEntry[] {
    const out: PoolEntry[] = [];
    for (const [size, list] of this.lists) {
      const keep = list.filter((e) => !drop(e));
      if (keep.length === list.length) continue;
      for (const e of list) if (drop(e)) out.push(e);
      this.lists.set(size, keep);
      this.count -= list.length - keep.length;
      this.bytes -= (list.length - keep.length) * size;
    }
    return out;
  }

  /** Remove and return every entry. */
  drain(): PoolEntry[] {
    if (this.count === 0) return [];
    const out: PoolEntry[] = [];
    for (const list of this.lists.values()) {
      for (const e of list) out.push(e);
      list.length = 0;
    }
    this.count = this.bytes = 0;
    return out;
  }
}

export class BufferPool {
  private readonly entries = new WeakMap<GPUBuffer, PoolEntry>();
  private readonly idle = new SizeClasses();
  private readonly pending = new SizeClasses();
  /** Kernel outputs handed out from `pending` since the last submit: not safe to upload into yet. */
  private readonly reusedInBatch = new Set<GPUBuffer>();
  private epoch = 0;
  /** `created` when the last epoch ended: whether the pool grew in this one. */
  private createdBefore = 0;
  private live = 0;
  private liveBytes = 0;
  private peakLiveBytes = 0;
  private created = 0;
  private destroyed = 0;
  private held = 0;
  private heldBytes = 0;

  constructor(
    private readonly create: (size: number) => GPUBuffer,
    private readonly maxIdleBytes: number,
    /** Whether the cap rises to the largest live bytes served (the runtime's default; a fixed cap when false). */
    private readonly followPeak = false,
  ) {}

  /** The allocation size for `bytes`: at least 16, a multiple of 16, within 25% of the request. */
  static sizeClass(bytes: number): number {
    const b = Math.max(16, bytes);
    const p = 2 ** Math.floor(Math.log2(b));
    const step = Math.max(16, p / 4);
    return Math.ceil(b / step) * step;
  }

  /**
   * A buffer of at least `bytes`. For a kernel output (`forUpload` false) a buffer released in the current batch
   * is preferred; for an upload only one released before the last submit will do.
   */
  acquire(bytes: number, forUpload = false): GPUBuffer {
    const size = BufferPool.sizeClass(bytes);
    let entry = forUpload ? undefined : this.pending.pop(size);
    if (entry) this.reusedInBatch.add(entry.buffer);
    else entry = this.idle.pop(size);
    return this.handOut(entry ?? this.newEntry(size));
  }

  /** A new buffer of at least `bytes`, never one freed before (a recorded step's upload: no command names it yet). */
  acquireNew(bytes: number): GPUBuffer {
    return this.handOut(this.newEntry(BufferPool.sizeClass(bytes)));
  }

  private newEntry(size: number): PoolEntry {
    const entry = { buffer: this.create(size), size, serial: this.created++, lastUse: 0, holds: 0, heldFree: false };
    this.entries.set(entry.buffer, entry);
    return entry;
  }

  /** `entry` to a tensor: live from now on. */
  private handOut(entry: PoolEntry): GPUBuffer {
    entry.lastUse = this.epoch;
    this.live++;
    this.liveBytes += entry.size;
    this.peakLiveBytes = Math.max(this.peakLiveBytes, this.liveBytes);
    return entry.buffer;
  }

  /** Whether a host upload into `buffer` must wait for a submit (it was reused by a kernel of this batch). */
  uploadMustWait(buffer: GPUBuffer): boolean {
    return this.reusedInBatch.has(buffer);
  }

  /** Give a buffer back; kernels may reuse it at once, uploads after the next submit (`afterSubmit`). */
  release(buffer: GPUBuffer): void {
    const entry = this.entries.get(buffer);
    if (!entry) throw new Error('internal: a buffer released to a pool that did not make it');
    this.live--;
    this.liveBytes -= entry.size;
    if (entry.holds > 0) entry.heldFree = true;
    else this.pending.push(entry);
  }

  /**
   * Keep `buffer` for a recorded step (`recording.ts`), which encodes commands naming it again and again: while
   * held it is never handed out, whether a tensor holds it now (it is kept when released) or it is free now (it
   * leaves the free lists). A buffer this pool did not make is refused (the caller's error: none should reach
   * a recording).
   */
  hold(buffer: GPUBuffer): void {
    const entry = this.entries.get(buffer);
    if (!entry) throw new Error('internal: a recorded step holds a buffer the pool did not make');
    if (entry.holds++ > 0) return;
    this.held++;
    this.heldBytes += entry.size;
    if (this.pending.take(entry) || this.idle.take(entry)) entry.heldFree = true;
  }

  /** Whether `buffer` is held (`hold`) and a tensor holds it too: handed out or lent, and not released since. */
  heldAndLive(buffer: GPUBuffer): boolean {
    const entry = this.entries.get(buffer);
    return entry !== undefined && entry.holds > 0 && !entry.heldFree;
  }

  /**
   * Hand a held buffer that no tensor holds to a new tensor (a recorded step's output that lives in its input slot,
   * `record-step.ts`); its release keeps it held again.
   */
  lend(buffer: GPUBuffer): void {
    const entry = this.entries.get(buffer);
    if (!entry || entry.holds === 0 || !entry.heldFree)
      throw new Error('internal: lending a buffer that is not held and free');
    entry.heldFree = false;
    this.handOut(entry);
  }

  /** The recorded step lets go (`hold`): a buffer no tensor holds goes back to the free lists (pending: the
   * step's last replay may be unsubmitted). */
  unhold(buffer: GPUBuffer): void {
    const entry = this.entries.get(buffer);
    if (!entry || entry.holds === 0) throw new Error('internal: a recorded step let go of a buffer it did not hold');
    if (--entry.holds > 0) return;
    this.held--;
    this.heldBytes -= entry.size;
    if (!entry.heldFree) return;
    entry.heldFree = false;
    this.pending.push(entry);
  }

  /** Called by the runtime once everything encoded so far has been submitted. */
  afterSubmit(): void {
    for (const e of this.pending.drain()) this.idle.push(e);
    this.reusedInBatch.clear();
  }

  /** A sync point (a read): if the pool grew since the last one and idle bytes are over the cap, destroy idle
   * buffers unused for the last KEEP_EPOCHS epochs. */
  endEpoch(): void {
    this.epoch++;
    const grew = this.created > this.createdBefore;
    this.createdBefore = this.created;
    const cap = this.cap();
    if (!grew || this.idle.bytes <= cap) return;
    // The least recently used first, and only down to the cap: a working set used since (a training step before
    // sampling) outlives one-off sizes of earlier iterations.
    const stale = this.idle
      .list((e) => e.lastUse < this.epoch - KEEP_EPOCHS)
      .sort((x, y) => x.lastUse - y.lastUse || x.serial - y.serial);
    let excess = this.idle.bytes - cap;
    const drop = new Set<PoolEntry>();
    for (const e of stale) {
      if (excess <= 0) break;
      drop.add(e);
      excess -= e.size;
    }
    for (const e of this.idle.removeWhere((e) => drop.has(e))) {
      this.entries.delete(e.buffer);
      e.buffer.destroy();
    }
    this.destroyed += drop.size;
  }

  /** The idle bytes kept: `maxIdleBytes`, or with `followPeak` the largest live bytes served if more. */
  cap(): number {
    return this.followPeak ? Math.max(this.maxIdleBytes, this.peakLiveBytes) : this.maxIdleBytes;
  }

  stats(): PoolStats {
    return {
      liveBuffers: this.live,
      liveBytes: this.liveBytes,
      pendingBuffers: this.pending.count,
      idleBuffers: this.idle.count,
      idleBytes: this.idle.bytes,
      created: this.created,
      destroyed: this.destroyed,
      heldBuffers: this.held,
      heldBytes: this.heldBytes,
    };
  }

  /** Destroy the idle buffers (live and pending ones die with the device). */
  trim(): void {
    for (const e of this.idle.drain()) {
      this.entries.delete(e.buffer);
      e.buffer.destroy();
    }
  }
}
