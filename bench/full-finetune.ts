/**
 * Full fine-tuning (every weight in f32, AdamW) past the 32-bit WebAssembly memory: a Qwen3-layout model of
 * Qwen3-0.6B's widths with fewer layers (10 by default: 313M parameters, vocabulary 151,936, tied embeddings;
 * random bf16 weights written on the spot by the project's own saver, the real Qwen3 tokenizer), trained for one
 * GRPO step by `rlvr train --model DIR` on the `cpu` backend without LoRA. Its memory estimate exceeds 4 GiB, so on a
 * runtime with memory64 (Node >= 24) the backend takes its memory64 build; prints the estimate, the build used,
 * the pool's heap, the process's peak RSS and its ratio to the estimate, and the step's seconds.
 *
 *   npm run bench:full-finetune [-- --layers 10 --prompts 4 --generations 4 --new 64 --threads 2 --on-non-finite stop]
 *
 * `--on-non-finite skip` runs the AdamW steps without donation (each keeps the state before it), as every run did
 * before the donated step: its estimate adds the step's copies, and the RL step's start beside its later updates.
 *
 * The run is a child process (peak RSS is a process's); the model directory is written once in the system's
 * temporary directory and removed at the end.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import {
  countParameters,
  CpuBackend,
  describeEstimate,
  train,
  type MetricRecord,
  type TransformerConfig,
} from '../src/index.js';
import { QWEN3_0_6B, writeRandomQwen3 } from './lib/random-checkpoint.js';

const { values } = parseArgs({
  options: {
    layers: { type: 'string', default: '10' },
    prompts: { type: 'string', default: '4' },
    generations: { type: 'string', default: '4' },
    new: { type: 'string', default: '64' },
    threads: { type: 'string', default: '2' },
    'on-non-finite': { type: 'string', default: 'stop' },
    // Internal: the roles of the child processes.
    build: { type: 'string' },
    ours: { type: 'string' },
  },
});

/** Qwen/Qwen3-0.6B's config.json, with `--layers` layers. */
const config: TransformerConfig = { ...QWEN3_0_6B, nLayers: Number(values.layers) };

const build = (dir: string): Promise<void> => writeRandomQwen3(dir, config);

/** One full fine-tuning step in this process: the estimate, the build, the heap, peak RSS and seconds. */
async function ours(model: string): Promise<void> {
  const argv = [
    ...['--model', model, '--task', 'addition', '--objective', 'grpo', '--steps', '1'],
    ...['--prompts-per-step', values.prompts!, '--num-generations', values.generations!],
    ...['--max-completion-length', values.new!, '--groups-per-minibatch', '1', '--eval-prompts', '1', '--eval-k', '1'],
    ...['--on-non-finite', values['on-non-finite']!],
  ];
  const { parseTrainArgs } = await import('../src/cli/args.js');
  const cfg = parseTrainArgs(argv);
  if (E.isLeft(cfg)) throw cfg.left;
  const backend = new CpuBackend({ threads: Number(values.threads) });
  const opened = { memory64: backend.memory64, maxMemoryBytes: backend.maxMemoryBytes };
  const rl: MetricRecord[] = [];
  let estimate = 0;
  let terms = '';
  const t0 = performance.now();
  const result = await train(cfg.right, {
    backend,
    onMemoryEstimate: (e) => {
      estimate = e.total;
      terms = describeEstimate(e);
    },
    onRecord: (r) => {
      if (r.phase === 'rl') rl.push(r);
    },
  });
  const cpu = process.cpuUsage();
  console.log(
    JSON.stringify({
      parameters: countParameters(config),
      opened_memory64: opened.memory64,
      trained_memory64: backend.memory64,
      max_memory_bytes: backend.maxMemoryBytes,
      describe: backend.describe(),
      estimate_bytes: estimate,
      estimate_terms: terms,
      heap_bytes: backend.poolStats().heapBytes,
      peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
      train_seconds: (performance.now() - t0) / 1000,
      cpu_seconds: (cpu.user + cpu.system) / 1e6,
      step_seconds: rl.map((r) => Number(r.seconds)),
      sample_seconds: rl.map((r) => Number(r.sample_seconds)),
      loss: rl.map((r) => r.loss),
      params_dtype: result.params.layers[0]!.wq.dtype,
    }),
  );
}

function run(args: string[]): Record<string, unknown> {
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
  if (r.status !== 0 || !line) throw new Error(`${args.join(' ')} failed (${r.status}):\n${r.stderr.slice(-3000)}`);
  return JSON.parse(line) as Record<string, unknown>;
}

async function main(): Promise<void> {
  if (values.build) return build(values.build);
  if (values.ours) return ours(values.ours);
  const gib = (b: unknown): string => `${((b as number) / 2 ** 30).toFixed(2)} GiB`;
  console.log(`bench:full-finetune | ${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores, ${gib(totalmem())} RAM`);
  console.log(`node ${process.version}; ${countParameters(config) / 1e6}M parameters; ${new Date().toISOString()}`);
  const dir = mkdtempSync(join(tmpdir(), 'rlvr-qwen3-full-'));
  try {
    const t0 = performance.now();
    run([process.argv[1]!, '--build', dir, '--layers', values.layers!]);
    console.log(`wrote the bf16 model in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const shape = [
      ...['--prompts', values.prompts!, '--generations', values.generations!, '--new', values.new!],
      ...['--on-non-finite', values['on-non-finite']!],
    ];
    const r = run([
      process.argv[1]!,
      '--ours',
      dir,
      '--layers',
      values.layers!,
      '--threads',
      values.threads!,
      ...shape,
    ]);
    console.log(JSON.stringify(r));
    const ratio = (r.peak_rss_bytes as number) / (r.estimate_bytes as number);
    console.log(
      `estimate ${gib(r.estimate_bytes)}; ${r.trained_memory64 ? 'memory64' : 'wasm32'} build (opened on ` +
        `${r.opened_memory64 ? 'memory64' : 'wasm32'}); heap ${gib(r.heap_bytes)}; peak RSS ${gib(r.peak_rss_bytes)} ` +
        `= ${ratio.toFixed(3)} x the estimate; step ${(r.step_seconds as number[]).map((s) => s.toFixed(1))} s`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
