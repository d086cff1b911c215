/**
 * The runtime's open command encoder and compute pass: dispatches go into one pass per submit, so Dawn opens
 * and closes a pass (and its synchronization scope) once per batch, not per dispatch; a read's copy ends the
 * pass (copies cannot be encoded inside one) and the next dispatch opens another. While the per-kernel profiler
 * runs, each dispatch gets a pass of its own carrying its timestamps; while a timeline records, each pass
 * carries its beginning and end (`timeline.ts`).
 */
export interface PassStamps {
  /** The timestamp writes of a pass for one profiled dispatch (null: not profiling). */
  readonly perDispatch: ((kernel: string) => GPUComputePassDescriptor) | null;
  /** The timestamp writes of an ordinary pass (undefined: none). */
  readonly perPass: () => GPUComputePassTimestampWrites | undefined;
}

export class CommandBatch {
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  /** What the current pass has bound, so an unchanged pipeline or bind group is not set again. */
  private passPipeline: GPUComputePipeline | null = null;
  private passBindGroup: GPUBindGroup | null = null;
  /** Dispatches encoded since the last submit. */
  dispatches = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly stamps: () => PassStamps,
  ) {}

  get open(): boolean {
    return this.encoder !== null;
  }

  /** Encode one dispatch into the open pass, opening an encoder and a pass if needed. */
  dispatch(kernel: string, pipeline: GPUComputePipeline, group: GPUBindGroup, wg: readonly number[]): void {
    this.encoder ??= this.device.createCommandEncoder({ label: 'rlvr:batch' });
    const stamps = this.stamps();
    if (stamps.perDispatch) {
      this.endPass();
      this.pass = this.encoder.beginComputePass(stamps.perDispatch(kernel));
    }
    if (!this.pass) {
      const timestampWrites = stamps.perPass();
      this.pass = this.encoder.beginComputePass(
        timestampWrites ? { label: 'rlvr:batch', timestampWrites } : { label: 'rlvr:batch' },
      );
    }
    // Consecutive dispatches of one kernel (AdamW over every leaf, a chain of adds) skip the repeated state.
    if (this.passPipeline !== pipeline) {
      this.passPipeline = pipeline;
      this.pass.setPipeline(pipeline);
    }
    if (this.passBindGroup !== group) {
      this.passBindGroup = group;
      this.pass.setBindGroup(0, group);
    }
    this.pass.dispatchWorkgroups(wg[0]!, wg[1]!, wg[2]!);
    this.dispatches++;
  }

  /** The encoder with no pass open, for a copy after everything encoded so far. */
  forCopy(): GPUCommandEncoder {
    this.encoder ??= this.device.createCommandEncoder({ label: 'rlvr:batch' });
    this.endPass();
    return this.encoder;
  }

  /** End the pass and hand the encoder over for its finish and submit (null if nothing was encoded). */
  take(): GPUCommandEncoder | null {
    const encoder = this.encoder;
    this.endPass();
    this.encoder = null;
    this.dispatches = 0;
    return encoder;
  }

  private endPass(): void {
    this.pass?.end();
    this.pass = null;
    this.passPipeline = this.passBindGroup = null;
  }
}
