import { afterAll, describe, expect } from 'vitest';
import * as T from '../../src/index.js';
import { reference } from '../helpers/compare.js';

export * from '../helpers/compare.js';

/**
 * Shared by the WebGPU specs: one device per test file (acquired at import), and comparison of the WebGPU
 * backend against the reference backend (spec/helpers/compare.ts). Without an adapter the specs skip with one line, except under
 * CI (process.env.CI), where they fail: CI installs Mesa so that an adapter is always there.
 */
async function acquire(): Promise<T.WebGpuBackend | null> {
  try {
    return await T.createWebGpuBackend();
  } catch (e) {
    if (e instanceof T.NoAdapterError && !process.env.CI) {
      console.log(`WebGPU specs skipped: ${e.message}`);
      return null;
    }
    throw e;
  }
}

export const gpu: T.WebGpuBackend | null = await acquire();
/** The oracle the GPU is compared with: the reference backend (spec/helpers/compare.ts). */
export const cpu = reference;

/** describe() that runs only with an adapter, and checks afterwards that the device recorded no error. */
export function describeGpu(name: string, body: (gpu: T.WebGpuBackend) => void): void {
  describe.skipIf(gpu === null)(name, () => {
    if (gpu) body(gpu);
  });
}

afterAll(async () => {
  if (!gpu) return;
  await gpu.sync();
  expect(gpu.runtime.error).toBeNull();
  gpu.dispose();
});

/** fast-check runs per property: llvmpipe is slow, so runs are few and shapes small. */
export const RUNS = { numRuns: 15 };
