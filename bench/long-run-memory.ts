/**
 * Memory over a long tiny RL run with a checkpoint every step (issue 26 item 14): samples, after a forced gc, the
 * JS heap (used, total), external and ArrayBuffer memory, RSS, the backend's buffers and bytes, the WebAssembly
 * pool and the live tensor count every `every` RL steps. `SNAP=500,2500` also writes heap snapshots at those RL
 * steps (/tmp/long-run-memory-<step>.heapsnapshot), to compare by constructor.
 *
 * Run: npm run bench:memory -- [steps=2000] [every=250] [keepRecords=default]
 * (or `node esbuild.config.mjs && node dist/bench/long-run-memory.js ...`).
 *
 * Measured (2 shared cores, Node 20, the CLI's tiny run of the issue, about 22 RL steps/s):
 * - keepRecords default (10,000; what the CLI used): heapUsed 8.82 MB at RL step 250, 10.91 MB at 2000, about
 *   1.2 KB a step until 20,000 records (then trimmed to 10,000): the kept metric records. This was the growth.
 * - keepRecords 0 (what the CLI passes now): heapUsed 9.19 MB at 500, 10.03 MB at 2500 (0.4 KB a step, tapering);
 *   the two snapshots differ only in V8 code (optimized code, deopt data, relocation info: +0.8 MB) and
 *   WeakArrayLists (+0.1 MB): the JIT tiering up, no object kept per step. Backend buffers (35, 36,672 bytes),
 *   the WebAssembly pool (36 live blocks, 227 carved, the rest reused) and live tensors (35) stay constant.
 * - RSS also moves with heapTotal: V8 grows its young generation (heapTotal 13.8 MB -> 44 MB and back to 14.6
 *   MB), so RSS swings between about 120 and 146 MB without a trend that the heap shows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString, writeHeapSnapshot } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CpuBackend, liveTensors, openBackend } from '../src/index.js';
import { parseTrainConfig } from '../src/training/config.js';
import { train } from '../src/training/trainer.js';

const steps = Number(process.argv[2] ?? 2000);
const every = Number(process.argv[3] ?? 250);
const keep = process.argv[4] === undefined ? undefined : Number(process.argv[4]);
// Heap snapshots at these RL steps (comma-separated), to compare constructors by count.
const snaps = new Set((process.env.SNAP ?? '').split(',').filter(Boolean).map(Number));
// A gc before each sample, without --expose-gc on the command line.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const dir = mkdtempSync(join(tmpdir(), 'long-run-memory-'));
const parsed = parseTrainConfig({
  model: { dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 2, dFf: 32, maxSeqLen: 24 },
  warmStartBatchSize: 16,
  promptsPerStep: 4,
  numGenerations: 4,
  evalPrompts: 10,
  evalK: 2,
  maxCompletionLength: 4,
  objective: 'grpo',
  seed: 3,
  digits: 1,
  warmStartSteps: 40,
  steps,
  checkpointEvery: 1,
  outputDir: join(dir, 'out'),
});
if (parsed._tag === 'Left') throw parsed.left;
const backend = await openBackend('cpu');
const mb = (n: number): string => (n / 2 ** 20).toFixed(2);
console.log('step heapUsed heapTotal external arrayBuffers rss (MB) | buffers bytes | pool | liveTensors');
try {
  await train(parsed.right, {
    backend,
    keepRecords: keep,
    onWarning: () => {},
    onProgress: ({ phase, step }) => {
      if (phase !== 'rl') return;
      if (snaps.has(step)) {
        gc();
        console.log(`snapshot ${writeHeapSnapshot(`/tmp/long-run-memory-${step}.heapsnapshot`)}`);
      }
      if (step % every !== 0) return;
      gc();
      gc();
      const m = process.memoryUsage();
      const b = backend.memory();
      const pool = backend instanceof CpuBackend ? JSON.stringify(backend.poolStats()) : '-';
      console.log(
        `${step} ${mb(m.heapUsed)} ${mb(m.heapTotal)} ${mb(m.external)} ${mb(m.arrayBuffers)} ${mb(m.rss)} | ${b.buffers} ${b.bytes} | ${pool} | ${liveTensors()}`,
      );
    },
  });
} finally {
  backend.dispose();
  rmSync(dir, { recursive: true, force: true });
}
