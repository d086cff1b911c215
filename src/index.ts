// The WebGPU backend's declarations name GPUDevice, GPUBuffer, ...: a user's compilation needs these globals too
// (`preserve` keeps the directive in dist/types/index.d.ts; the package comes from `webgpu`'s dependencies).
/// <reference types="@webgpu/types" preserve="true" />
/** Public entry point: tensors, autodiff transformations, ops and backends. */
export type { Backend, KernelTensor, MemoryInfo, Storage } from './core/backend.js';
export { readBackBytes, resetReadBackBytes } from './core/backend.js';
export {
  registerKernel,
  registerKernels,
  registeredKernels,
  kernelsFor,
  fallbackCounts,
  resetFallbackCounts,
  KERNEL_NAMES,
  MASKED_KEY_BIAS,
  type Kernels,
  type KernelName,
  type KernelFunc,
  type KernelFuncs,
  type KernelConfig,
  type UnaryOp,
  type BinaryOp,
  type ReduceOp,
  type AdamWHyper,
  type AdamWManyHyper,
} from './core/kernels.js';
export { isHalf, type DType, type HalfDType, type HostArray, type TypedArray } from './core/dtype.js';
export { roundBf16, roundF16, bf16Value, f16Value, roundToHalf, widenHalf } from './core/half.js';
export * from './core/errors.js';
export { Tensor, liveTensors } from './core/tensor.js';
export { tidy, keep, dispose } from './core/scope.js';
export { treeLeaves, treeMap, treeUnflatten, treeZip, type PyTree } from './core/pytree.js';
export { grad, valueAndGrad, vjp, stopGradient, checkpoint, type VjpFn } from './core/transforms.js';
export { withoutTapes as noGrad } from './core/tape.js';
export { Rng, type RngState } from './core/rng.js';
export { getDefaultBackend, setDefaultBackend } from './core/runtime.js';
// The backend registry also installs the CPU backend as the default one.
export {
  BACKENDS,
  BACKEND_NAMES,
  isBackendName,
  openBackend,
  type BackendEntry,
  type BackendName,
} from './backends/registry.js';
export { broadcastShapes, sizeOf } from './core/shape.js';
export {
  CpuBackend,
  defaultFma as defaultCpuFma,
  defaultThreads as defaultCpuThreads,
  runtimeHasMemory64,
  runtimeHasRelaxedSimd,
  type CpuOptions,
} from './backends/cpu/index.js';
export { ReferenceBackend, type HostBackend } from './backends/reference/index.js';
export {
  WebGpuBackend,
  createWebGpuBackend,
  NoAdapterError,
  GpuValidationError,
  DeviceLostError,
  RecordingError,
  recordStep,
  type RecordedStep,
  type WebGpuBackendOptions,
  type AdapterDescription,
  type AdapterPath,
  type PoolStats,
  type RuntimeStats,
  type RuntimeCounters,
  type KernelTime,
  type GpuSpan,
  type TimelineReport,
} from './backends/webgpu/index.js';
export * from './ops/creation.js';
export { broadcastTo, expand, unbroadcast } from './ops/broadcast.js';
export * from './ops/elementwise.js';
export * from './ops/reduce.js';
export * from './ops/movement.js';
export * from './ops/matmul.js';
export * from './ops/indexing.js';
export * from './ops/softmax.js';
export * from './ops/norm.js';
export * from './ops/attention.js';
export * from './ops/rope.js';
export * from './ops/swiglu.js';
export * from './ops/loss.js';
export * from './ops/optim.js';
export * from './ops/sampling.js';
export { setDebugNans } from './ops/op.js';
export { FileSystemError, NodeOnlyError } from './platform/errors.js';
export * as objectives from './objectives/index.js';
export * from './nn/index.js';
export * from './io/index.js';
export * from './rl/index.js';
export * from './tasks/index.js';
export * from './tokenizers/index.js';
export * from './training/index.js';
