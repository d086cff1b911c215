import * as E from 'fp-ts/lib/Either.js';
import { describe, expect, it } from 'vitest';
import { ReferenceBackend } from '../../src/backends/reference/index.js';
import { parseTrainArgs } from '../../src/cli/args.js';
import { smallConfig } from '../../src/nn/transformer.js';
import { tokenizerFor } from '../../src/tasks/index.js';
import type { TrainConfig } from '../../src/training/config.js';
import { checkRunFits, defaultMemoryLimits } from '../../src/training/fits.js';
import { MemoryError } from '../../src/training/memory.js';
import { runtimeHasMemory64 } from '../../src/backends/cpu/index.js';
import { taskFor } from '../../src/training/run.js';
import { rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';
import { rejectionOf, useCliBundle } from './helpers/harness.js';

/**
 * A memory refusal says what would fit when something would, and names the largest part of the estimate with the
 * flag that shrinks it: a 2 GiB refusal caused by the warm-start batch used to suggest nothing (or only
 * `--backend webgpu`), though a smaller `--warm-start-batch-size` fits. And `--memory-limit-gb` above the host's
 * memory is capped there unless `--allow-over-host-memory` says otherwise: it replaced the host's check, so a run
 * of 120 GiB started allocating on a 24 GiB host.
 */
const bundle = useCliBundle('memory-refusals');
const GiB = 2 ** 30;

function config(argv: string[]): TrainConfig {
  const r = parseTrainArgs(argv);
  if (E.isLeft(r)) throw r.left;
  return r.right;
}

/** The refusal's line (stderr, one line, exit 2) without the estimate's breakdown. */
function refusal(argv: string[]): string {
  const r = rlvrSync(bundle.path, ['train', ...argv]);
  expect(r.status).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  return lines[0]!.replace(/ memory estimate: .*$/, '');
}

describe('a memory refusal names its largest part and what would fit', () => {
  it('the warm-start batch: named with its flag, and the batch it suggests runs under the same limit', () => {
    const argv = withArgs(TINY_ARGS, { '--warm-start-batch-size': '20000', '--memory-limit-gb': '0.1' });
    const line = refusal(argv);
    expect(line).toMatch(
      /The largest part: the activations of a warm-start batch of 20000 \(--warm-start-batch-size\)/,
    );
    const suggested = /What would fit: .*--warm-start-batch-size (\d+) \([\d.]+ MiB\)/.exec(line);
    expect(suggested, line).not.toBeNull();
    const n = Number(suggested![1]);
    expect(n).toBeGreaterThan(1);
    expect(n).toBeLessThan(20000);
    const ok = rlvrSync(bundle.path, ['train', ...withArgs(argv, { '--warm-start-batch-size': String(n) })]);
    expect([ok.status, ok.stderr]).toEqual([0, '']);
  });

  it('no one batch is enough: the batches shrunk together, and that run is not refused', () => {
    // The default run's RL minibatch (128 rollouts) and warm-start batch (64) take turns as the largest part.
    const line = refusal(['--memory-limit-gb', '0.05', '--threads', '1']);
    expect(line).toMatch(
      /The largest part: the activations of an RL minibatch of 128 rollouts \(--groups-per-minibatch\)/,
    );
    const together = /What would fit: ((?:--[a-z-]+ \d+ ?)+) \([\d.]+ MiB\)/.exec(line);
    expect(together, line).not.toBeNull();
    const flags = together![1]!.trim().split(' ');
    expect(flags.length).toBeGreaterThanOrEqual(4); // two flags or more, each with its value
    const run = ['--memory-limit-gb', '0.05', '--threads', '1', ...flags];
    const ok = rlvrSync(bundle.path, ['train', ...run, '--warm-start-steps', '1', '--steps', '0']);
    expect([ok.status, ok.stderr]).toEqual([0, '']);
  });

  it("a new model's parameters: named, with the flags that make a smaller model", () => {
    const big = ['--d-model', '2048', '--n-layers', '8', '--n-heads', '16', '--n-kv-heads', '16'];
    const small = ['--warm-start-batch-size', '2', '--prompts-per-step', '1', '--num-generations', '2'];
    const line = refusal([...big, ...small, '--eval-prompts', '1', '--eval-k', '1', '--memory-limit-gb', '0.5']);
    expect(line).toMatch(
      /The largest part: the model's [\d.]+M parameters .*\(a smaller model: --d-model, --n-layers\)/,
    );
  });
});

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

describe.runIf(runtimeHasMemory64())(
  "the CLI on a runtime with memory64: the cpu backend's build as the run uses it",
  () => {
    it('the backend line follows the estimate when the run takes memory64, and the refusal names its 16 GiB', () => {
      // 1.67B parameters, 67 GiB estimated: past the 32-bit memory, so the backend takes memory64 before refusing.
      const huge = ['--d-model', '4096', '--n-layers', '24', '--n-heads', '32', '--n-kv-heads', '32'];
      const r = rlvrSync(bundle.path, ['train', ...huge, '--memory-limit-gb', '1000', '--allow-over-host-memory']);
      expect(r.status).toBe(2);
      const lines = r.stdout.trim().split('\n');
      const estimateAt = lines.findIndex((l) => l.startsWith('rlvr: memory estimate: '));
      expect(lines[0]).toMatch(/^rlvr: backend cpu \(WebAssembly .*kernels, \d+ threads?;/);
      expect(lines[0]).not.toMatch(/memory64/);
      expect(estimateAt).toBeGreaterThan(0);
      expect(lines[estimateAt + 1]).toMatch(/^rlvr: backend cpu \(WebAssembly .*kernels, memory64, \d+ threads?;/);
      expect(r.stderr).toMatch(/16\.00 GiB available \(the cpu backend's WebAssembly memory64: 16 GiB at most/);
    });
  },
);
