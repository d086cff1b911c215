import type { PoolStats } from './buffer-pool.js';

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

/** The runtime's counters, and its dispatches per kernel name (`kernelCounts`). */
export class Counters {
  readonly counts = {
    dispatches: 0,
    submits: 0,
    buffersCreated: 0,
    uploadedBytes: 0,
    bindGroupsCreated: 0,
    readBacks: 0,
  } satisfies RuntimeCounters;
  private readonly perKernel = new Map<string, number>();

  /** `n` dispatches of `kernel` encoded. */
  dispatched(kernel: string, n = 1): void {
    this.counts.dispatches += n;
    this.perKernel.set(kernel, (this.perKernel.get(kernel) ?? 0) + n);
  }

  /** Dispatches per kernel name since the runtime was made (or `resetKernelCounts`). */
  kernelCounts(): Map<string, number> {
    return new Map(this.perKernel);
  }

  resetKernelCounts(): void {
    this.perKernel.clear();
  }
}
