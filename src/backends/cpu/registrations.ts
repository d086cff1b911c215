import { fallbackKernel, registerKernels, type KernelFuncs, type KernelName } from '../../core/kernels.js';
import type { HostBackend } from '../reference/host.js';
import * as C from './copy-kernels.js';
import * as W from './wasm-kernels.js';

/**
 * What a kernel registered for 'cpu' gets (`CpuBackend` is one, and index.ts, which defines it, registers these):
 * the WebAssembly host for its own kernels, a host backend for the reference kernel it falls back to.
 */
type CpuBackend = HostBackend & W.WasmHost;

/**
 * The CPU backend's own kernels: each runs its WebAssembly kernel (or, for copies, block moves) where it covers the
 * case (f32, and the shapes it handles), else the reference kernel (`fallbackKernel`, counted like the kernels it
 * does not register).
 */
type Fast<K extends KernelName> = (
  b: CpuBackend,
  ...args: Parameters<KernelFuncs<CpuBackend>[K]> extends [unknown, ...infer A] ? A : never
) => ReturnType<KernelFuncs<CpuBackend>[K]> | null;

function orReference<K extends KernelName>(name: K, fast: Fast<K>): KernelFuncs<CpuBackend>[K] {
  return ((b: CpuBackend, ...args: unknown[]) =>
    (fast as (b: CpuBackend, ...a: unknown[]) => unknown)(b, ...args) ??
    (fallbackKernel(b, name) as (...a: unknown[]) => unknown)(...args)) as unknown as KernelFuncs<CpuBackend>[K];
}

export function registerCpuKernels(): void {
  registerKernels<CpuBackend>('cpu', {
    matmul: orReference('matmul', W.matmul),
    binary: orReference('binary', W.binary),
    softmax: orReference('softmax', W.softmax),
    rmsNorm: orReference('rmsNorm', W.rmsNorm),
    rmsNormBackward: orReference('rmsNormBackward', W.rmsNormBackward),
    addRmsNorm: orReference('addRmsNorm', W.addRmsNorm),
    attention: orReference('attention', W.attention),
    attentionBackward: orReference('attentionBackward', W.attentionBackward),
    rope: orReference('rope', W.rope),
    swiglu: orReference('swiglu', W.swiglu),
    swigluBackward: orReference('swigluBackward', W.swigluBackward),
    tokenLogProbs: orReference('tokenLogProbs', W.tokenLogProbs),
    tokenLogProbsBackward: orReference('tokenLogProbsBackward', W.tokenLogProbsBackward),
    sumSquares: orReference('sumSquares', W.sumSquares),
    adamwMany: orReference('adamwMany', W.adamwMany),
    updateSlice: orReference('updateSlice', C.updateSlice),
    gather: orReference('gather', C.gather),
    slice: orReference('slice', C.slice),
    pad: orReference('pad', C.pad),
    scatterAdd: orReference('scatterAdd', C.scatterAdd),
  });
}
