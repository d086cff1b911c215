import type { BindGroupCache } from './bind-groups.js';
import type { BindingKind } from './pipelines.js';
import type { UniformStore } from './uniforms.js';

/**
 * A recorded step's commands (`GpuRuntime.beginRecording` ... `endRecording`; `record-step.ts` is the API):
 * the dispatches of one run of a function, each with the pipeline and bind group it was encoded with, and the
 * copies that put the run's host uploads back where a later dispatch of the same run overwrites them. Replaying
 * them (`GpuRuntime.replay`) runs the function again with no op layer, tape or runtime bookkeeping in between:
 * only Dawn's encoding calls, as a CUDA graph replays a captured stream.
 *
 * Replay is sound because every buffer a command names stays the recording's (`BufferPool.hold`): the
 * intermediates, which no one else is handed while it lives; the input slots, written by a copy before each
 * replay; and any tensor the function read without being given it (a table cached across calls), kept from the
 * pool when its owner lets go. Its uniform blocks live in a store of its own, which is never recycled.
 */
export type RecordedCommand =
  | {
      readonly kind: 'dispatch';
      readonly kernel: string;
      readonly pipeline: GPUComputePipeline;
      readonly group: GPUBindGroup;
      readonly workgroups: readonly [number, number, number];
    }
  | { readonly kind: 'copy'; readonly from: GPUBuffer; readonly to: GPUBuffer; readonly bytes: number };

/** A host upload seen while recording: before command `at`, `data` into `buffer`. */
interface RecordedUpload {
  readonly at: number;
  readonly buffer: GPUBuffer;
  readonly data: Uint8Array;
}

/** What the runtime collects while a step is recorded. */
export class Recorder {
  readonly commands: RecordedCommand[] = [];
  /** Every storage buffer a dispatch or an upload names. */
  readonly buffers = new Set<GPUBuffer>();
  /** Buffers some dispatch writes. */
  readonly written = new Set<GPUBuffer>();
  readonly uploads: RecordedUpload[] = [];
  /** Buffers made for uploads while recording, each held once from the start (`GpuRuntime.upload`). */
  readonly uploadBuffers: GPUBuffer[] = [];

  constructor(
    /** The recording's own uniform blocks and bind groups (the runtime's own are swapped out meanwhile). */
    readonly uniforms: UniformStore,
    readonly bindGroups: BindGroupCache,
  ) {}

  dispatch(
    kernel: string,
    pipeline: GPUComputePipeline,
    group: GPUBindGroup,
    workgroups: readonly [number, number, number],
    buffers: readonly GPUBuffer[],
    bindings: readonly BindingKind[],
  ): void {
    this.commands.push({ kind: 'dispatch', kernel, pipeline, group, workgroups });
    for (let i = 0; i < buffers.length; i++) {
      this.buffers.add(buffers[i]!);
      if (bindings[i] === 'write') this.written.add(buffers[i]!);
    }
  }

  upload(buffer: GPUBuffer, data: ArrayBufferView): void {
    this.buffers.add(buffer);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice();
    this.uploads.push({ at: this.commands.length, buffer, data: bytes });
  }

  /**
   * The uploads a replay must repeat: those into a buffer that a dispatch writes or another upload fills. The
   * others keep their contents from the recording run on (nothing else writes a held buffer).
   */
  uploadsToRepeat(): RecordedUpload[] {
    const uploadsInto = new Map<GPUBuffer, number>();
    for (const u of this.uploads) uploadsInto.set(u.buffer, (uploadsInto.get(u.buffer) ?? 0) + 1);
    return this.uploads.filter((u) => this.written.has(u.buffer) || uploadsInto.get(u.buffer)! > 1);
  }
}

/** A finished recording: what `GpuRuntime.replay` encodes, and what it holds until `GpuRuntime.dropRecording`. */
export interface Recording {
  readonly commands: readonly RecordedCommand[];
  /**
   * Buffers held from the pool, once per hold (every buffer the commands name, the constants' copies, the extra
   * ones kept, and again each upload's buffer, held from its upload on).
   */
  readonly held: readonly GPUBuffer[];
  readonly uniforms: UniformStore;
  readonly dispatches: number;
  dropped: boolean;
}
