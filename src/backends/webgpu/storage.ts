import type { Storage } from '../../core/backend.js';
import { BackendError } from '../../core/errors.js';

/** What a WebGPU tensor's opaque `Storage` is: a pooled GPU buffer, usable until `free()`. */
export class GpuStorage {
  freed = false;
  constructor(readonly buffer: GPUBuffer) {}
}

export const asStorage = (buffer: GPUBuffer): Storage => new GpuStorage(buffer) as unknown as Storage;

export function gpuStorage(s: Storage): GpuStorage {
  const g = s as unknown;
  if (!(g instanceof GpuStorage)) throw new BackendError('webgpu', 'storage does not belong to the WebGPU backend');
  if (g.freed) throw new BackendError('webgpu', 'storage was used after it was freed');
  return g;
}

export const bufferOf = (s: Storage): GPUBuffer => gpuStorage(s).buffer;
