/**
 * The SFT training step (forward + backward + AdamW with gradient clipping, as the trainer's warm-start runs it)
 * on the WebGPU backend over the model sizes of issue 10, printing per step: ms, tokens/s, dispatches, submits,
 * buffers created (`createBuffer` calls), bytes uploaded and bind groups created; the dispatches per kernel; and,
 * with RLVR_PROFILE=1 (or --profile) on an adapter with `timestamp-query`, GPU time per kernel.
 *
 * Run: npm run bench:step [-- --sizes default,small|all --warmup 2 --steps 3 --batch N --max-idle-bytes N]
 * On a CPU rasterizer (llvmpipe) only the default size runs unless others are asked for (`--sizes all --batch 1`
 * counts every size's dispatches in minutes: they do not depend on the batch); on a GPU all sizes run. PyTorch on
 * the same model (bench/torch_model.py) is timed beside ours by `npm run bench:gpu` (its peer, bench/torch_gpu.py).
 */
import { createWebGpuBackend, dispose, tidy, valueAndGrad, type WebGpuBackend } from '../src/index.js';
import { adamwInit, adamwStep, type TransformerParams } from '../src/nn/index.js';
import { sftLoss, type SequenceBatch } from '../src/rl/index.js';
import { argValue, hasFlag, median, printHeader } from './lib/common.js';
import { batchFor, paramsFor, selectSizes, type ModelSize } from './lib/models.js';
import { printKernelTable } from './lib/kernels.js';

const WARMUP = Number(argValue('--warmup') ?? 2);
const STEPS = Number(argValue('--steps') ?? 3);
const batchOverride = argValue('--batch');

const maxIdle = argValue('--max-idle-bytes');
const gpu = await createWebGpuBackend({
  profile: hasFlag('--profile') || process.env.RLVR_PROFILE === '1',
  ...(maxIdle ? { maxIdleBytes: Number(maxIdle) } : {}),
});
printHeader('bench:step', gpu);
console.log(`SFT step = valueAndGrad(sftLoss) + adamwStep (lr 1e-4, clip 1.0), loss read back each step`);
console.log(`warm-up ${WARMUP} steps, then ${STEPS} measured; figures are per step (median for ms)`);
if (maxIdle) console.log(`buffer pool idle cap: ${maxIdle} bytes (default 512 MiB)`);

interface Row {
  readonly size: string;
  readonly msPerStep: number;
  readonly tokensPerS: number;
  readonly dispatches: number;
  readonly submits: number;
  readonly buffersCreated: number;
  readonly uploadedBytes: number;
  readonly bindGroups: number;
}

async function runSize(size: ModelSize, g: WebGpuBackend): Promise<Row> {
  const batch: SequenceBatch = batchFor(size, batchOverride ? Number(batchOverride) : undefined);
  const tokens = batch.batchSize * (batch.promptLen + batch.completionLen);
  const c = size.config;
  console.log(
    `\n== ${size.name}: d${c.dModel} L${c.nLayers} heads ${c.nHeads} dFf ${c.dFf} vocab ${c.vocabSize}, ` +
      `B${batch.batchSize} x T${batch.promptLen + batch.completionLen} (torch row: ${size.torchRow})`,
  );
  let params: TransformerParams = paramsFor(c, g);
  let opt = adamwInit(params);
  const step = async (): Promise<number> => {
    const next = tidy(() => {
      const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, c, batch))(params);
      const stepped = adamwStep(params, grads, opt, { lr: 1e-4, maxGradNorm: 1 });
      return { params: stepped.params, opt: stepped.state, loss };
    });
    dispose([params, opt]);
    params = next.params;
    opt = next.opt;
    const loss = (await next.loss.data())[0]!;
    next.loss.dispose();
    if (!Number.isFinite(loss)) throw new Error(`${size.name}: the loss is ${loss}`);
    return loss;
  };
  for (let i = 0; i < WARMUP; i++) await step();
  g.runtime.resetKernelCounts();
  const before = g.stats();
  const times: number[] = [];
  for (let i = 0; i < STEPS; i++) {
    const t0 = performance.now();
    await step();
    times.push(performance.now() - t0);
  }
  const after = g.stats();
  const per = (k: 'dispatches' | 'submits' | 'buffersCreated' | 'uploadedBytes' | 'bindGroupsCreated'): number =>
    (after[k] - before[k]) / STEPS;
  const ms = median(times);
  const row: Row = {
    size: size.name,
    msPerStep: ms,
    tokensPerS: tokens / (ms / 1000),
    dispatches: per('dispatches'),
    submits: per('submits'),
    buffersCreated: per('buffersCreated'),
    uploadedBytes: per('uploadedBytes'),
    bindGroups: per('bindGroupsCreated'),
  };
  console.log(
    `${ms.toFixed(1)} ms/step (steps: ${times.map((t) => t.toFixed(0)).join(', ')}), ` +
      `${row.tokensPerS.toFixed(0)} tokens/s; ` +
      `per step: ${row.dispatches} dispatches, ${row.submits} submits, ${row.buffersCreated} buffers created, ` +
      `${row.uploadedBytes} bytes uploaded, ${row.bindGroups} bind groups created`,
  );
  await printKernelTable(g, STEPS);
  dispose([params, opt]);
  await g.sync();
  return row;
}

const sizes = selectSizes(argValue('--sizes') ?? process.env.RLVR_BENCH_SIZES, gpu.runtime.cpuLike);
if (gpu.runtime.cpuLike && !argValue('--sizes') && !process.env.RLVR_BENCH_SIZES) {
  console.log('CPU rasterizer: the default size only; --sizes small,medium,large,0.6b|all for the others');
}
const rows: Row[] = [];
for (const size of sizes) {
  rows.push(await runSize(size, gpu));
}
console.log('');
console.table(
  rows.map((r) => ({
    size: r.size,
    'ms/step': +r.msPerStep.toFixed(1),
    'tokens/s': Math.round(r.tokensPerS),
    dispatches: r.dispatches,
    submits: r.submits,
    'buffers created': r.buffersCreated,
    'bytes uploaded': r.uploadedBytes,
    'bind groups created': r.bindGroups,
  })),
);
gpu.dispose();
