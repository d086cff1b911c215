import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { TrainConfig } from '../../../src/training/config.js';
import { tinyRun } from '../../training/helpers/tiny-run.js';
import { cliBundle } from './cli.js';

/** Setup the hardening specs share: temporary directories, rejected promises, the CLI bundle and a tiny GRPO run. */

/** A fresh temporary directory, named after the spec and the case that made it (to find what a failure left). */
export const tempDir = (tag: string): string => mkdtempSync(join(tmpdir(), `rlvr-${tag}-`));

/** What the promise rejects with, or null when it resolves. */
export const rejectionOf = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => null,
    (e: unknown) => e,
  );

/**
 * The CLI bundle of this spec file (or describe block), or another program's (`cliBundle`'s `entry`, `suffix`):
 * built before its tests, removed after.
 */
export function useCliBundle(tag: string, entry?: string, suffix?: string): { readonly path: string } {
  const bundle = cliBundle(tag, entry, suffix);
  beforeAll(bundle.build, 60_000);
  afterAll(bundle.remove);
  return bundle;
}

/** The tiny run with GRPO, 2 warm-start steps and 1 RL step: the shortest run that updates the weights. */
export const tinyGrpoRun = (over: Partial<TrainConfig> = {}): TrainConfig =>
  tinyRun({ objective: 'grpo', warmStartSteps: 2, steps: 1, ...over });
