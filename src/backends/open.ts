import type { Backend } from '../core/backend.js';
import { getDefaultBackend } from '../core/runtime.js';
import { createWebGpuBackend } from './webgpu/index.js';

/**
 * The backend a run asked for by name. WebGPU without an adapter rejects with a typed `NoAdapterError` that says
 * what to install; a caller that prefers to go on may catch it and use the CPU backend. Dispose a WebGPU backend
 * when done (Dawn keeps the process alive while a device lives).
 */
export async function openBackend(name: 'cpu' | 'webgpu'): Promise<Backend> {
  return name === 'cpu' ? getDefaultBackend() : createWebGpuBackend();
}
