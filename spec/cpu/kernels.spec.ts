import { cpuKernelSpecs } from './kernel-cases.js';

// The plain 128-bit SIMD kernels: every runtime has them, and their results are the same on every machine.
cpuKernelSpecs(false);
