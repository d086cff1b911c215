import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backends/reference/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { smallConfig } from '../../src/nn/transformer.js';
import { tokenizerFor } from '../../src/tasks/index.js';
import type { TrainConfig } from '../../src/training/config.js';
import { checkRunFits, defaultMemoryLimits } from '../../src/training/fits.js';
import { MemoryError } from '../../src/training/memory.js';
import { taskFor } from '../../src/training/run.js';
import { rejectionOf } from './helpers/harness.js';

/**
 * `--memory-limit-gb` above the host's memory is capped there unless `--allow-over-host-memory` says otherwise:
 * it replaced the host's check, so a run of 120 GiB started allocating on a 24 GiB host.
 */
const GiB = 2 ** 30;

function config(argv: string[]): TrainConfig {
  const r = parseTrainArgs(argv);
  if (E.isLeft(r)) throw r.left;
  return r.right;
}

describe("--memory-limit-gb above the host's memory is capped there unless --allow-over-host-memory", () => {
  const HOST = 24 * GiB;

  it('defaultMemoryLimits: under the host, the limit; above it, the host, naming both flags; allowed, the limit', () => {
    expect(defaultMemoryLimits(config(['--memory-limit-gb', '8']), HOST)).toMatchObject({ totalBytes: 8 * GiB });
    const capped = defaultMemoryLimits(config(['--memory-limit-gb', '206']), HOST);
    expect(capped.totalBytes).toBe(HOST);
    expect(capped.source).toMatch(/host's memory.*--memory-limit-gb 206 is above it; --allow-over-host-memory/);
    const allowed = config(['--memory-limit-gb', '206', '--allow-over-host-memory']);
    expect(defaultMemoryLimits(allowed, HOST)).toMatchObject({ totalBytes: 206 * GiB, source: '--memory-limit-gb' });
    expect(defaultMemoryLimits(config([]), HOST)).toMatchObject({ totalBytes: HOST });
  });

  it("a run estimated past this host's memory, under a limit far above it: refused before anything is allocated", async () => {
    // 2.2B parameters, on a backend without a memory of its own (the host's is the only bound).
    const huge = ['--d-model', '4096', '--n-layers', '32', '--n-heads', '32', '--n-kv-heads', '32'];
    const backend = new ReferenceBackend();
    const fitsUnder = (argv: string[]) => {
      const cfg = config([...huge, ...argv]);
      const task = taskFor(cfg);
      const tokenizer = tokenizerFor(task);
      const run = { cfg, task, tokenizer, config: smallConfig(tokenizer.vocabSize, cfg.model), needsReference: false };
      return rejectionOf(Promise.resolve().then(() => checkRunFits(run, null, [null], backend, {})));
    };
    const e = await fitsUnder(['--memory-limit-gb', '1000000']);
    expect(e).toBeInstanceOf(MemoryError);
    expect((e as MemoryError).message).toMatch(/available \(the host's memory: --memory-limit-gb 1000000 is above it/);
    expect(await fitsUnder(['--memory-limit-gb', '1000000', '--allow-over-host-memory'])).toBeNull();
  });

  it('--allow-over-host-memory alone is refused: it needs --memory-limit-gb', () => {
    const r = parseTrainArgs(['--allow-over-host-memory']);
    expect(E.isLeft(r) && r.left.message).toBe(
      'train config: --allow-over-host-memory needs --memory-limit-gb (without it, it does nothing)',
    );
  });
});
