/**
 * KV-cache sampling throughput: `sampleRollouts` (prefill, then one cached forward and one on-device token choice
 * per token, reading back each row's id and log-prob) at 64 and at 512 new tokens, in tokens/s, with the decode
 * cost per token early (tokens 1-64) and late (65-512), which should stay flat, and the bytes read back per
 * generated token. EOS is never sampled here (the tokenizer's EOS id is out of range), so every run generates
 * exactly the requested tokens. The peer in the same run is the CPU backend on the default model.
 *
 * Run: npm run bench:sample [-- --model default|medium --rows 64 --cpu --vocab 151936 --top-p 0.9 --new 64]
 * (rows: 16 on llvmpipe, else 64). `default` is the trainer's model with a longer context (d64 L2); `medium` is
 * issue 10's d512 L8 row (64 rows x 64 new tokens), which `npm run bench:gpu` times beside transformers' `generate`
 * (bench/torch_gpu.py). `--vocab` widens the model's vocabulary (Qwen3's is 151,936: the size where a
 * [B, V] read-back per token costs), `--new` lists the token counts (default 64,512).
 */
import { CpuBackend, createWebGpuBackend, dispose, readBackBytes, Rng, type Backend } from '../src/index.js';
import { initParams, smallConfig, type TransformerConfig } from '../src/nn/index.js';
import { sampleRollouts } from '../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor, type Tokenizer } from '../src/tasks/index.js';
import { argValue, hasFlag, printHeader } from './lib/common.js';
import { MODEL_SIZES, withoutEos } from './lib/models.js';

const MAX_NEW = (argValue('--new') ?? '64,512').split(',').map(Number);
const model = argValue('--model') ?? 'default';
const vocab = argValue('--vocab');
const topP = Number(argValue('--top-p') ?? 1);
const task = additionTask();
const base = tokenizerFor(task);
/** The task's tokenizer with an EOS id no row can sample: generation always runs to maxNewTokens. */
const tokenizer: Tokenizer = withoutEos(base);

function configFor(name: string): TransformerConfig {
  const maxSeqLen = 16 + Math.max(...MAX_NEW);
  if (name === 'default') return smallConfig(base.vocabSize, { maxSeqLen });
  const size = MODEL_SIZES.find((s) => s.name === name);
  if (!size)
    throw new Error(`unknown model ${name}; choose default or one of ${MODEL_SIZES.map((s) => s.name).join(', ')}`);
  return { ...size.config, vocabSize: Math.max(size.config.vocabSize, base.vocabSize), maxSeqLen };
}

const modelConfig = configFor(model);
const config = vocab ? { ...modelConfig, vocabSize: Number(vocab) } : modelConfig;
const gpu = await createWebGpuBackend();
// 64 rows as issue 10's table; 16 by default on a CPU rasterizer, where 64 rows x 512 tokens take minutes.
const rows = Number(argValue('--rows') ?? (gpu.runtime.cpuLike ? 16 : 64));
const prompts = sampleProblems(task, Math.max(1, Math.round(rows / 8)), new Rng(2)).map((p) => p.prompt);

async function timeSampling(backend: Backend, maxNewTokens: number): Promise<number> {
  const params = initParams(config, new Rng(0), { backend });
  const opts = { groupSize: 8, maxNewTokens, temperature: 1, topP };
  await sampleRollouts(params, config, tokenizer, prompts, new Rng(3), { ...opts, maxNewTokens: 4 }); // warm-up
  const bytes = readBackBytes(backend);
  const t0 = performance.now();
  const out = await sampleRollouts(params, config, tokenizer, prompts, new Rng(3), opts);
  const ms = performance.now() - t0;
  readBack.set(backend, (readBackBytes(backend) - bytes) / (out.batchSize * maxNewTokens));
  if (out.completionLen !== maxNewTokens)
    throw new Error(`generated ${out.completionLen} tokens, wanted ${maxNewTokens}`);
  dispose(params);
  return ms;
}
/** Bytes read back per generated token (per row) in each backend's last run. */
const readBack = new Map<Backend, number>();

async function report(name: string, backend: Backend, sizes: readonly number[]): Promise<Map<number, number>> {
  const ms = new Map<number, number>();
  for (const n of sizes) {
    const t = await timeSampling(backend, n);
    ms.set(n, t);
    const b = prompts.length * 8;
    console.log(
      `${name}: ${b} rows x ${n} new tokens: ${t.toFixed(0)} ms, ${((b * n) / (t / 1000)).toFixed(0)} tokens/s, ` +
        `${readBack.get(backend)!.toFixed(1)} bytes read back per row and token`,
    );
  }
  if (ms.has(64) && ms.has(512)) {
    const early = ms.get(64)! / 64;
    const late = (ms.get(512)! - ms.get(64)!) / (512 - 64);
    console.log(
      `${name}: decode ms/token: tokens 1-64 ${early.toFixed(2)} (prefill included), ` +
        `tokens 65-512 ${late.toFixed(2)}: late/early ${(late / early).toFixed(2)}`,
    );
  }
  return ms;
}

printHeader('bench:sample', gpu);
const c = config;
console.log(
  `model ${model}: d${c.dModel} L${c.nLayers} heads ${c.nHeads}/${c.nKvHeads} dFf ${c.dFf} vocab ${c.vocabSize}; ` +
    `${prompts.length * 8} rows (8 per prompt), temperature 1, top-p ${topP}`,
);
const before = gpu.stats();
const ours = await report('webgpu', gpu, MAX_NEW);
const after = gpu.stats();
console.log(
  `webgpu counters over the runs: ${after.dispatches - before.dispatches} dispatches, ` +
    `${after.submits - before.submits} submits, ${after.buffersCreated - before.buffersCreated} buffers created`,
);
if (model === 'default' || hasFlag('--cpu')) {
  const n = MAX_NEW[0]!;
  const cpu = await report('cpu', new CpuBackend(), [n]);
  console.log(`webgpu / cpu time at ${n} new tokens: ${(ours.get(n)! / cpu.get(n)!).toFixed(2)}x`);
}
gpu.dispose();
