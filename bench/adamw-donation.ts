/**
 * What donating AdamW's state saves (issue 34 item 4): full fine-tuning SFT steps (valueAndGrad(sftLoss) +
 * adamwStep) of a Qwen3-layout model on the cpu backend, the functional step against the donated one
 * (`adamwStep(..., { donate: true })`, what the trainer does unless `onNonFinite` is `skip`). Each mode runs in its
 * own process (peak RSS is a process's lifetime maximum), in interleaved rounds; each reports the backend's peak
 * bytes in use over a step (its tensors), the WebAssembly pool's heap (what the memory was grown to), the peak RSS,
 * the time of a step, and the memory estimate's AdamW-step term and total for the same shape. It also prints the
 * estimate of issue 34's 313M-parameter model (Qwen3-0.6B's layout, 10 layers) at the same batch.
 *
 * Run: node esbuild.config.mjs && node dist/bench/adamw-donation.js [--d-model 512] [--layers 10] [--vocab 151936]
 *      [--batch 1] [--seq 32] [--steps 2] [--rounds 2]
 */
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import {
  adamwInit,
  adamwStep,
  CpuBackend,
  countParameters,
  dispose,
  estimateTrainingMemory,
  tidy,
  valueAndGrad,
  type RunShape,
  type TransformerConfig,
  type TransformerParams,
} from '../src/index.js';
import { initParams, smallConfig } from '../src/nn/index.js';
import { sftLoss } from '../src/rl/index.js';
import { Rng } from '../src/index.js';
import { argValue, median } from './lib/common.js';
import { randomSftBatch } from './lib/models.js';

const num = (name: string, fallback: number): number => Number(argValue(name) ?? fallback);
const dModel = num('--d-model', 512);
const nLayers = num('--layers', 10);
const vocab = num('--vocab', 151_936);
const batch = num('--batch', 1);
const seq = num('--seq', 32);
const steps = num('--steps', 2);
const rounds = num('--rounds', 2);

/** Qwen3's layout (grouped-query heads of 64 here, q/k norms, tied embeddings) at a width and depth. */
const qwen3 = (d: number, layers: number, heads: number, headDim: number, dFf: number): TransformerConfig =>
  smallConfig(vocab, {
    dModel: d,
    nLayers: layers,
    nHeads: heads,
    nKvHeads: heads / 2,
    headDim,
    dFf,
    maxSeqLen: Math.max(seq, 64),
    rmsEps: 1e-6,
    qkNorm: true,
    tieEmbeddings: true,
    ropeTheta: 1_000_000,
  });
const config = qwen3(dModel, nLayers, dModel / 64, 64, 3 * dModel);
const shape = (donates: boolean): RunShape => ({
  sampledRows: batch,
  minibatchRows: batch,
  promptTokens: seq / 2,
  completionTokens: seq / 2,
  withReference: false,
  donates,
});

interface Sample {
  readonly mode: 'functional' | 'donated';
  /** Bytes of the backend's tensors at a step's peak, the most over the steps. */
  readonly peakBytes: number;
  readonly heapBytes: number;
  readonly maxRss: number;
  readonly stepMs: number[];
}

function child(mode: Sample['mode']): void {
  const backend = new CpuBackend();
  const donate = mode === 'donated';
  let params: TransformerParams = initParams(config, new Rng(0), { backend });
  let opt = adamwInit(params);
  const data = randomSftBatch(vocab, batch, seq, 1);
  let peakBytes = 0;
  const stepMs: number[] = [];
  for (let s = 0; s < steps; s++) {
    backend.resetPeakMemory();
    const t0 = performance.now();
    const next = tidy(() => {
      const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, config, data))(params);
      const stepped = adamwStep(params, grads, opt, { lr: 1e-4, maxGradNorm: 1 }, { donate });
      return { loss, params: stepped.params, opt: stepped.state };
    });
    next.loss.dataSync();
    stepMs.push(performance.now() - t0);
    peakBytes = Math.max(peakBytes, backend.peakMemoryBytes());
    dispose([params, opt, next.loss]); // no-ops for what the donated step consumed
    params = next.params;
    opt = next.opt;
  }
  const sample: Sample = {
    mode,
    peakBytes,
    heapBytes: backend.poolStats().heapBytes,
    maxRss: process.resourceUsage().maxRSS * 1024,
    stepMs,
  };
  console.log(JSON.stringify(sample));
  dispose([params, opt]);
  backend.dispose();
}

const mib = (n: number): string => `${(n / 2 ** 20).toFixed(1)} MiB`;
const gib = (n: number): string => `${(n / 2 ** 30).toFixed(2)} GiB`;

function parent(): void {
  const w = countParameters(config) * 4;
  console.log(`AdamW donation | node ${process.version}, ${cpus().length} CPU cores (${cpus()[0]?.model ?? '?'})`);
  console.log(
    `Qwen3 layout d${dModel} L${nLayers} V${vocab}: ${(countParameters(config) / 1e6).toFixed(1)}M parameters ` +
      `(${mib(w)} f32); SFT B${batch} x T${seq}, ${steps} steps per process, ${rounds} interleaved rounds`,
  );
  const samples: Sample[] = [];
  for (let r = 0; r < rounds; r++) {
    for (const mode of ['functional', 'donated'] as const) {
      const args = [process.argv[1]!, '--child', mode, ...process.argv.slice(2)];
      const out = execFileSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 24 });
      samples.push(JSON.parse(out.trim().split('\n').at(-1)!) as Sample);
    }
  }
  console.log(
    'mode | step peak (tensors) | pool heap | peak RSS | step ms (median) | estimate: AdamW step, tied embedding ' +
      'gradient sums, total (peak RSS / total)',
  );
  for (const mode of ['functional', 'donated'] as const) {
    const ss = samples.filter((s) => s.mode === mode);
    const e = estimateTrainingMemory(config, shape(mode === 'donated'));
    console.log(
      `${mode.padEnd(11)} | ${ss.map((s) => mib(s.peakBytes)).join(', ')} | ${ss.map((s) => mib(s.heapBytes)).join(', ')} | ` +
        `${ss.map((s) => mib(s.maxRss)).join(', ')} | ${median(ss.flatMap((s) => s.stepMs.slice(1))).toFixed(0)} | ` +
        `${mib(e.optimizerStep)}, ${mib(e.gradientSums)}, ${mib(e.total)} ` +
        `(${(median(ss.map((s) => s.maxRss)) / e.total).toFixed(2)})`,
    );
  }
  const [f, d] = (['functional', 'donated'] as const).map((m) => samples.filter((s) => s.mode === m));
  const drop = (pick: (s: Sample) => number): string => mib(median(f!.map(pick)) - median(d!.map(pick)));
  console.log(
    `donation saves: step peak ${drop((s) => s.peakBytes)}, pool heap ${drop((s) => s.heapBytes)}, ` +
      `peak RSS ${drop((s) => s.maxRss)}; 3 x the weights = ${mib(3 * w)}`,
  );
  // Issue 34's full fine-tune: Qwen3-0.6B's layout with 10 layers and its vocabulary (313M parameters).
  const issue = { ...qwen3(1024, 10, 16, 128, 3072), vocabSize: 151_936 };
  const [fe, de] = [estimateTrainingMemory(issue, shape(false)), estimateTrainingMemory(issue, shape(true))];
  console.log(
    `estimate of the 313M-parameter model (${(countParameters(issue) / 1e6).toFixed(1)}M) at this batch: ` +
      `${gib(fe.total)} (AdamW step ${gib(fe.optimizerStep)}) -> ${gib(de.total)} donated`,
  );
}

if (process.argv[2] === '--child') child(process.argv[3] as Sample['mode']);
else parent();
