/**
 * LoRA GRPO at a real model's shapes on the `cpu` backend: a Qwen3-0.6B-shaped model (its config.json's values,
 * random bf16 weights written on the spot by the project's own saver, the real Qwen3 tokenizer), trained with
 * `rlvr train --model DIR --lora-r 16 --lora-target-modules all-linear --gradient-checkpointing` inside the CPU
 * backend's 4 GiB, against PyTorch doing the same LoRA step on the same cores (bench/lora_torch.py), in
 * interleaved rounds. Shows its progress (a stage per model build and per side and round: about 3 minutes each
 * at the defaults on 2 cores, with a line every 30 s while one runs when stdout is not a terminal) and ends with a
 * table: each round's rollout and update seconds, the process's peak RSS and the ratios (minimum and median).
 *
 *   npm run bench:lora-real [-- --rounds 2 --steps 1 --prompts 4 --generations 4 --new 64 --threads 2 --no-torch
 *                              --size 0.6b|1.7b]
 *
 * `--size 1.7b` takes Qwen3-1.7B's shape instead (hidden 2048, intermediate 6144): its bf16 weights alone are
 * 3.4 GB, so with the run's other terms it needs more than a 32-bit memory's 4 GiB (Node 24 or later, memory64).
 *
 * Each side runs in its own process (peak RSS is a process's), the model directory is written once (in the
 * system's temporary directory, removed at the end) and both read it. `--merged-export` instead writes the model
 * merged with random adapters as f32 (about 2.4 GB) and checks that it loads back to the adapted model's logits.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as E from 'fp-ts/lib/Either.js';
import {
  Rng,
  saveHfCheckpoint,
  tensor as tensorFrom,
  train,
  CpuBackend,
  type MetricRecord,
  type TransformerConfig,
} from '../src/index.js';
import { createStages } from '../src/cli/progress.js';
import { loraRealTable, type SideRun } from './lib/lora-real-report.js';
import { QWEN3_0_6B, writeRandomQwen3 } from './lib/random-checkpoint.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '1' },
    steps: { type: 'string', default: '1' },
    prompts: { type: 'string', default: '4' },
    generations: { type: 'string', default: '4' },
    new: { type: 'string', default: '64' },
    threads: { type: 'string', default: '2' },
    'no-torch': { type: 'boolean', default: false },
    // Qwen3-0.6B's shape, or Qwen3-1.7B's (its bf16 weights alone are 3.4 GB: past a 32-bit memory's 4 GiB with
    // the run's other terms, so on Node 24 or later with memory64).
    size: { type: 'string', default: '0.6b' },
    // Instead of timing: write the model merged with random adapters in f32 (about 2.4 GB), load it back in a
    // fresh backend and compare its logits with the adapted model's.
    'merged-export': { type: 'boolean', default: false },
    // Internal: the roles of the child processes.
    build: { type: 'string' },
    ours: { type: 'string' },
    merge: { type: 'string' },
  },
});

/** Qwen/Qwen3-1.7B's config.json: hidden 2048, intermediate 6144, the rest as 0.6B's. */
const QWEN3_1_7B_CONFIG: TransformerConfig = { ...QWEN3_0_6B, dModel: 2048, dFf: 6144 };
const SIZES: Readonly<Record<string, TransformerConfig>> = { '0.6b': QWEN3_0_6B, '1.7b': QWEN3_1_7B_CONFIG };
if (!Object.hasOwn(SIZES, values.size!)) {
  console.error(`bench:lora-real: --size ${values.size} is not one of ${Object.keys(SIZES).join(', ')}`);
  process.exit(2);
}
/** The model of this run (`--size`). */
const MODEL_CONFIG = SIZES[values.size!]!;
const SIZE_NAME = `Qwen3-${values.size!.toUpperCase()}`;
const LORA = ['--lora-r', '16', '--lora-alpha', '32', '--lora-target-modules', 'all-linear'];

const build = (dir: string): Promise<void> => writeRandomQwen3(dir, MODEL_CONFIG);

/** One run of ours in this process: the step's seconds split as the metrics record them, and the peak RSS. */
async function ours(model: string): Promise<void> {
  const argv = [
    ...['--model', model, '--task', 'addition', '--objective', 'grpo', ...LORA, '--gradient-checkpointing'],
    ...['--steps', values.steps!, '--prompts-per-step', values.prompts!, '--num-generations', values.generations!],
    ...['--max-completion-length', values.new!, '--groups-per-minibatch', '1', '--eval-prompts', '1', '--eval-k', '1'],
  ];
  const { parseTrainArgs } = await import('../src/cli/args.js');
  const cfg = parseTrainArgs(argv);
  if (E.isLeft(cfg)) throw cfg.left;
  const backend = new CpuBackend({ threads: Number(values.threads) });
  const rl: MetricRecord[] = [];
  let estimate = 0;
  const result = await train(cfg.right, {
    backend,
    onMemoryEstimate: (e) => (estimate = e.total),
    onRecord: (r) => {
      if (r.phase === 'rl') rl.push(r);
    },
  });
  const sample = rl.map((r) => Number(r.sample_seconds));
  const update = rl.map((r) => Number(r.seconds) - Number(r.sample_seconds));
  console.log(
    JSON.stringify({
      side: 'ours',
      sample_seconds: sample,
      update_seconds: update,
      peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
      heap_bytes: backend.poolStats().heapBytes,
      estimate_bytes: estimate,
      reward: rl.map((r) => r.reward),
      base_dtype: result.params.layers[0]!.wq.dtype,
    }),
  );
}

/**
 * The merged f32 export at this size: the base (bf16) with LoRA r 16 on every linear layer, B drawn so the merge
 * moves every adapted weight, merged (W + scaling B A) and saved as f32 safetensors, then loaded back by the Hub
 * loader into a second backend: its logits against the adapted model's, within 1e-5 of the largest.
 */
async function mergedExport(model: string): Promise<void> {
  const { loadHfCheckpoint, initLora, withLora, mergeLora, forward, randn, dispose, LORA_MODULES } = await import(
    '../src/index.js'
  );
  const { statSync } = await import('node:fs');
  const first = new CpuBackend({ threads: Number(values.threads) });
  const loaded = await loadHfCheckpoint(model, first, { keepDType: true })();
  if (E.isLeft(loaded)) throw loaded.left;
  const rng = new Rng(1);
  const lora = initLora(
    MODEL_CONFIG,
    { r: 16, alpha: 32, dropout: 0, targetModules: LORA_MODULES, useRslora: false },
    rng,
    {
      backend: first,
    },
  );
  const moved = {
    ...lora,
    layers: lora.layers.map((l) =>
      Object.fromEntries(
        Object.entries(l).map(([m, p]) => [m, { a: p!.a, b: randn(p!.b.shape, rng, { std: 0.01, backend: first }) }]),
      ),
    ),
  };
  const ids = [151644, 872, 198, 18, 22, 10, 20, 28, 151645, 198, 151644, 77091, 198];
  const logitsOn = (params: Parameters<typeof forward>[0], backend: CpuBackend): Float32Array => {
    const tokens = tensorOf(ids, backend);
    const out = forward(params, MODEL_CONFIG, tokens).dataSync() as Float32Array;
    tokens.dispose();
    return out;
  };
  const adapted = logitsOn(withLora(loaded.right.params, moved), first);
  const merged = mergeLora(withLora(loaded.right.params, moved));
  const out = mkdtempSync(join(tmpdir(), 'rlvr-merged-'));
  try {
    const t0 = performance.now();
    const saved = await saveHfCheckpoint(out, merged, MODEL_CONFIG, { dtype: 'f32' })();
    if (E.isLeft(saved)) throw saved.left;
    const writeSeconds = (performance.now() - t0) / 1000;
    dispose(merged);
    first.dispose();
    const second = new CpuBackend({ threads: Number(values.threads) });
    const back = await loadHfCheckpoint(out, second)();
    if (E.isLeft(back)) throw back.left;
    const reloaded = logitsOn(back.right.params, second);
    let worst = 0;
    let scale = 0;
    for (let i = 0; i < adapted.length; i++) {
      worst = Math.max(worst, Math.abs(adapted[i]! - reloaded[i]!));
      scale = Math.max(scale, Math.abs(adapted[i]!));
    }
    console.log(
      JSON.stringify({
        merged_file_bytes: statSync(join(out, 'model.safetensors')).size,
        write_seconds: writeSeconds,
        max_abs_logit_difference: worst,
        largest_logit: scale,
        within: worst <= 1e-5 * scale,
      }),
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

function tensorOf(ids: number[], backend: CpuBackend) {
  return tensorFrom(new Int32Array(ids), [1, ids.length], { dtype: 'i32', backend });
}

/** A child process to its end, asynchronously (the progress keeps ticking): its JSON line, or why it failed. */
function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-3000)));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = stdout.split('\n').find((l) => l.startsWith('{'));
      if (code !== 0 || !line) reject(new Error(`${cmd} ${args.join(' ')} failed (${code}):\n${stderr}`));
      else resolve(JSON.parse(line) as Record<string, unknown>);
    });
  });
}

async function main(): Promise<void> {
  if (values.build) return build(values.build);
  if (values.ours) return ours(values.ours);
  if (values.merge) return mergedExport(values.merge);
  const rounds = Number(values.rounds);
  const torch = !values['no-torch'];
  const stages = createStages(1 + (values['merged-export'] ? 1 : rounds * (torch ? 2 : 1)));
  const dir = mkdtempSync(join(tmpdir(), `rlvr-qwen3-${values.size}-`));
  try {
    stages.start(`writing a ${SIZE_NAME}-shaped bf16 model`);
    await run(process.execPath, [process.argv[1]!, '--build', dir, '--size', values.size!]);
    stages.done();
    if (values['merged-export']) {
      stages.start('merged f32 export, loaded back');
      const r = await run(process.execPath, [
        ...[process.argv[1]!, '--merge', dir, '--threads', values.threads!, '--size', values.size!],
      ]);
      stages.done();
      stages.stop();
      console.log(
        `merged model.safetensors: ${r.merged_file_bytes} bytes written in ${Number(r.write_seconds).toFixed(1)} s; ` +
          `reloaded logits within ${Number(r.max_abs_logit_difference).toExponential(2)} of the adapted model's ` +
          `(largest logit ${Number(r.largest_logit).toFixed(2)}; bound 1e-5 of it): ${r.within ? 'pass' : 'FAIL'}`,
      );
      return;
    }
    const mine: SideRun[] = [];
    const peer: SideRun[] = [];
    const self = [process.argv[1]!, '--ours', dir, '--steps', values.steps!, '--threads', values.threads!];
    self.push('--size', values.size!);
    const shape = ['--prompts', values.prompts!, '--generations', values.generations!, '--new', values.new!];
    const step = (r: SideRun): string =>
      `rollout ${r.sample_seconds.map((x) => x.toFixed(1)).join(', ')} s, update ${r.update_seconds.map((x) => x.toFixed(1)).join(', ')} s`;
    for (let round = 1; round <= rounds; round++) {
      stages.start(`round ${round}/${rounds}: ours (rlvr train --model ${SIZE_NAME}, LoRA r 16)`);
      mine.push((await run(process.execPath, [...self, ...shape])) as unknown as SideRun);
      stages.done(step(mine.at(-1)!));
      if (!torch) continue;
      stages.start(`round ${round}/${rounds}: PyTorch (bench/lora_torch.py)`);
      const env = { OPENBLAS_NUM_THREADS: values.threads!, OMP_WAIT_POLICY: 'PASSIVE' };
      const t = ['bench/lora_torch.py', '--model', dir, '--steps', values.steps!, '--threads', values.threads!];
      peer.push((await run('/usr/bin/python3', [...t, ...shape], env)) as unknown as SideRun);
      stages.done(step(peer.at(-1)!));
    }
    stages.stop();
    console.log(`\n${loraRealTable(mine, peer)}`);
  } finally {
    stages.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
