/** The WebGPU backend's public surface. */
export { WebGpuBackend, createWebGpuBackend, type WebGpuBackendOptions } from './backend.js';
export { NoAdapterError, GpuValidationError, DeviceLostError, RecordingError } from './errors.js';
export type { AdapterDescription, AdapterPath, AcquireOptions } from './device.js';
export type { PoolStats } from './buffer-pool.js';
export type { RuntimeCounters, RuntimeStats } from './counters.js';
export type { KernelTime } from './profiler.js';
export type { GpuSpan, TimelineReport } from './timeline.js';
export { recordStep, type RecordedStep } from './record-step.js';
