import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { cpuKernelSpecs } from './kernel-cases.js';

/**
 * The memory64 builds (a shared 64-bit memory, addresses as i64) through the same cases as the 32-bit builds, with
 * every tensor placed past 4 GiB. Node >= 24 has memory64; CI runs on such a Node, so there a runtime without it
 * fails this file instead of skipping it.
 */
const available = T.runtimeHasMemory64();

if (available) {
  cpuKernelSpecs(false, true);
  if (T.runtimeHasRelaxedSimd()) cpuKernelSpecs(true, true);
} else
  it('memory64 is available (Node >= 24), or this file is skipped outside CI', () => {
    if (process.env.CI === 'true') expect.fail(`memory64 is missing on node ${process.version}: CI runs Node >= 24`);
  });
