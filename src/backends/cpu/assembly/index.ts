// The CPU backend's WebAssembly kernels (AssemblyScript, 128-bit SIMD). Every export takes byte addresses in the
// shared memory and, last, (tid, nthreads): the runtime calls it once per thread with the same arguments, and the
// kernel does that thread's fixed part of the work.
export { gemm, gemmHalfB, gemmScratchFloats } from './gemm';
export { attentionForward, attentionBackward, attentionScratchFloats } from './attention';
export {
  rmsNorm, rmsNormBackward, rmsNormWeightGrad, swiglu, swigluBackward, rope, tokenLogProbs, tokenLogProbsBackward,
  softmaxRows, sumSquaresBlocks, adamw, binary,
} from './rows';
export { maddAddendThroughput, maddThroughput } from './probe';
