/**
 * The page side of spec/browser/page.spec.ts (bundled for the browser): runs every case of kernel-cases.ts on a
 * WebGPU backend opened through navigator.gpu and hands the numbers back through `globalThis.runKernelCases`; and on
 * the CPU backend (WebAssembly) through `globalThis.runCpuKernelCases`.
 */
import { CpuBackend, createWebGpuBackend, NoAdapterError, type WebGpuBackend } from '../../src/index.js';
import { CASES, runCase, type CaseResult } from './kernel-cases.js';

export interface PageResults {
  /** null when the page has no WebGPU adapter (the message says why). */
  readonly adapter: string | null;
  readonly noAdapter: string | null;
  readonly results: Record<string, CaseResult>;
  /** The first error the device recorded (validation, out of memory, loss), if any. */
  readonly deviceError: string | null;
}

async function runKernelCases(): Promise<PageResults> {
  let gpu: WebGpuBackend;
  try {
    gpu = await createWebGpuBackend();
  } catch (e) {
    if (e instanceof NoAdapterError) return { adapter: null, noAdapter: e.message, results: {}, deviceError: null };
    throw e;
  }
  const results: Record<string, CaseResult> = {};
  try {
    for (const c of CASES) results[c.name] = await runCase(c, gpu);
    await gpu.sync();
    return { adapter: gpu.adapter.summary, noAdapter: null, results, deviceError: gpu.runtime.error?.message ?? null };
  } finally {
    gpu.dispose();
  }
}

export interface CpuPageResults {
  readonly crossOriginIsolated: boolean;
  readonly threads: number;
  /** Kernel calls the worker threads shared. */
  readonly parallelRuns: number;
  readonly describe: string;
  readonly results: Record<string, CaseResult>;
}

/** The same cases on the CPU backend in the page: threads where it is cross-origin isolated, one thread otherwise. */
async function runCpuKernelCases(): Promise<CpuPageResults> {
  const cpu = new CpuBackend({ threads: 2, minParallelWork: 0 });
  await cpu.whenReady();
  const results: Record<string, CaseResult> = {};
  try {
    for (const c of CASES) results[c.name] = await runCase(c, cpu);
    const g = globalThis as { crossOriginIsolated?: boolean };
    return {
      crossOriginIsolated: g.crossOriginIsolated === true,
      threads: cpu.threads,
      parallelRuns: cpu.poolStats().parallelRuns,
      describe: cpu.describe(),
      results,
    };
  } finally {
    cpu.dispose();
  }
}

const g = globalThis as { runKernelCases?: typeof runKernelCases; runCpuKernelCases?: typeof runCpuKernelCases };
g.runKernelCases = runKernelCases;
g.runCpuKernelCases = runCpuKernelCases;
