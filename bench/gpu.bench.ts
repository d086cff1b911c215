/**
 * `npm run bench:gpu`: one command, one table (issue 27). On the first adapter the backend finds, interleaved
 * rounds of: matmul 1024^3, 2048^3, 4096^3 (f32); the SFT step at d512 L8 (B16 x T256) and at a Qwen3-0.6B size
 * (d1024 L28 V151936, B4 x T256); KV-cache sampling (d512 L8, 16 rows x 128 new tokens); a LoRA step (B4 x T256)
 * and a LoRA rollout (16 rows x 128 new tokens) at the Qwen3-0.6B size with its matrices frozen in bf16, r 16,
 * alpha 32 on every linear layer (bench/lib/lora-gpu.ts); and, where `python3` has torch with CUDA, the same work
 * in PyTorch on the same device between them (bench/torch_gpu.py: fp32 eager, TF32 off, the model and step of
 * bench/torch_model.py; for LoRA, peft on that model with its base in bf16). It prints the adapter line, the
 * device's features, each task's median over the rounds beside the peer's and their ratio, the runtime's counters
 * per step, and the configurations the kernels tuned themselves to (tuner.ts; RLVR_TUNE=off for the fixed
 * defaults).
 *
 * Every timed result is checked against the CPU backend before its time counts, so a dropped dispatch cannot
 * read as fast: each matmul's product entry by entry; each timed SFT step (every one starts from the same
 * parameters) its loss and gradient norm (at the 0.6B size the CPU backend's 4 GiB cannot hold the f32 weights
 * and a forward, so there the reference backend checks the loss of a 1 x 16-token batch through the same weights
 * and the norm must repeat exactly across rounds); each sampling run's tokens scored again by the CPU backend,
 * whose log-probs must be the ones the GPU recorded; the LoRA step as the 0.6B one, with the adapters' gradient
 * norm checked too (the bf16 base fits the CPU backend), and the LoRA rollout's log-probs on a slice of its rows
 * (lora-gpu.ts says which, and why B starts nonzero there).
 *
 * `--quick` runs the same tasks at tiny sizes (two rounds, well under a minute on llvmpipe): spec/webgpu/
 * bench-gpu.spec.ts runs it in CI so the script never rots. `--rounds N` (default 3), no round started that would end
 * past `--seconds S` of rounds (default DEFAULT_ROUND_SECONDS, so one plain run fits 8 minutes); `--tasks matmul,lora`
 * for a subset (of matmul, step, sample, lora, f16: a matmul on subgroup matrices, bench/lib/subgroup-matrix.ts); a bad argument is one line naming it, exit 2 (`parseBenchGpuArgs`).
 * Run on any machine with a GPU and its Vulkan driver (Linux; Metal or D3D12 elsewhere), Node and `npm ci`:
 * `npm run bench:gpu`; python3 with a CUDA torch (and transformers, for sampling; peft, for LoRA) adds the
 * PyTorch rows.
 */
import {
  CpuBackend,
  ReferenceBackend,
  createWebGpuBackend,
  dispose,
  matmul,
  recordStep,
  Rng,
  tensor,
  tidy,
  toBackend,
  treeLeaves,
  treeUnflatten,
  valueAndGrad,
  type Backend,
  type Tensor,
  type WebGpuBackend,
  type WebGpuBackendOptions,
} from '../src/index.js';
import { scratchValues } from '../src/backends/webgpu/kernels/tune.js';
import {
  type AdamWConfig,
  adamwInit,
  adamwScheduleValues,
  adamwStep,
  smallConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../src/nn/index.js';
import { sampleRollouts, scoreLogProbs, sftLoss, type SequenceBatch } from '../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor } from '../src/tasks/index.js';
import * as E from 'fp-ts/lib/Either.js';
import { decimal, scanFlags } from '../src/cli/args.js';
import type { FlagKind } from '../src/cli/train-flags.js';
import { FieldError, quoteValue } from '../src/core/errors.js';
import { median, printHeader } from './lib/common.js';
import { batchFor, MODEL_SIZES, paramsFor, withoutEos, type ModelSize } from './lib/models.js';
import { TorchPeer, type PeerAnswer } from './lib/torch-peer.js';
import { check, CheckError, hostReference, type Task, STEPS_A_ROUND, timedSteps } from './lib/gpu-task.js';
import { loraTasks, type LoraRollout } from './lib/lora-gpu.js';
import { probeFeatures } from './lib/gpu-features.js';
import { subgroupMatrixTasks } from './lib/subgroup-matrix.js';
import { GPU_VARIANTS, timelineLines, topKernelLines, type GpuVariant } from './lib/timeline-report.js';
import { DEFAULT_BATCHING } from '../src/backends/webgpu/runtime.js';

export interface BenchGpuOptions {
  readonly quick?: boolean;
  readonly rounds?: number;
  /** Backend options (the spec passes `tune` and a cache dir of its own). */
  readonly backend?: WebGpuBackendOptions;
  /** Which kinds of task to run (default all): `matmul`, `step`, `sample`, `lora`. */
  readonly tasks?: readonly string[];
  /**
   * Runtime configurations to time the steps under (`GPU_VARIANTS`; default: the library's defaults alone), in
   * the same interleaved rounds, each step's timeline printed per configuration.
   */
  readonly variants?: readonly GpuVariant[];
  /** Look for the PyTorch peer (default true). */
  readonly peer?: boolean;
  /** Start no round that would end past this many seconds of rounds (default DEFAULT_ROUND_SECONDS, none with
   * --quick); the table has the rounds run. */
  readonly seconds?: number;
  readonly log?: (line: string) => void;
}

/** One row of the table: a task's median figure, the peer's, and what was checked. */
export interface BenchRow {
  readonly task: string;
  readonly unit: string;
  readonly ours: number;
  readonly torch: number | null;
  /** ours / torch as speed (> 1: ours faster), null without the peer. */
  readonly speedRatio: number | null;
  readonly checked: string;
  readonly counters: string;
}

function matmulTask(gpu: WebGpuBackend, cpu: Backend, n: number, label = ''): Task {
  const name = `matmul ${n}^3 f32${label}`;
  const av = scratchValues(n * n, 1);
  const bv = scratchValues(n * n, 2);
  const a = tensor(av, [n, n], { backend: gpu });
  const b = tensor(bv, [n, n], { backend: gpu });
  let want: Float32Array | null = null;
  let reps = 0;
  const flops = 2 * n ** 3;
  // Inputs in [-0.5, 0.5): each sum of n products is rounded on both sides, in different orders; a random walk
  // of n roundings of terms up to 1/4 stays within 16 sqrt(n) 2^-24 (n / 4), while a dropped dispatch is off by
  // a whole entry (typically sqrt(n / 144)).
  const atol = 16 * Math.sqrt(n) * 2 ** -24 * (n / 4);
  const task: Task = {
    name,
    unit: 'GFLOP/s',
    figure: (ms) => flops / ms / 1e6,
    checked: 'every entry vs the CPU backend',
    counters: '',
    run: async () => {
      if (!want) {
        want = await hostReference(name, async () => {
          const [ca, cb] = [tensor(av, [n, n], { backend: cpu }), tensor(bv, [n, n], { backend: cpu })];
          const c = matmul(ca, cb);
          const out = (await c.data()) as Float32Array;
          dispose([ca, cb, c]);
          return out;
        });
        // A first product: the pipeline, and the tuning of its class at the read, before any timing; a second
        // (warm) one sizes the repetitions to about 150 ms a round.
        const first = matmul(a, b);
        check(name, 'C', await first.data(), want, atol, 0);
        first.dispose();
        const t0 = performance.now();
        matmul(a, b).dispose();
        await gpu.sync();
        reps = Math.max(3, Math.min(200, Math.round(150 / Math.max(0.05, performance.now() - t0))));
      }
      const t0 = performance.now();
      let c: Tensor | null = null;
      for (let r = 0; r < reps; r++) {
        c?.dispose();
        c = matmul(a, b);
      }
      await gpu.sync();
      const ms = (performance.now() - t0) / reps;
      const s0 = gpu.stats();
      check(name, 'C', await c!.data(), want, atol, 0);
      c!.dispose();
      task.counters = `${reps} products a round, ${gpu.stats().readBacks - s0.readBacks} read-back to check the last`;
      return ms;
    },
    peer: { task: 'matmul', n, reps: 10 },
    dispose: () => dispose([a, b]),
  };
  return task;
}

/** The global gradient norm, summed in f64 on the host over every leaf (what adamwStep's clipping computes). */
async function gradNormOf(grads: TransformerParams): Promise<number> {
  let sum = 0;
  for (const t of treeLeaves(grads)) for (const v of await t.data()) sum += v * v;
  return Math.sqrt(sum);
}

/**
 * What the step tasks of one size share: the parameters drawn once on the host backend (at the 0.6B size 36 s
 * of random numbers on a 2-core EPYC, which each device drew again before: with three draws the size's first
 * run outlasted a 150 s slot on an H200 machine), the host reference (computed once) and, per device, the
 * parameters uploaded from the host's.
 */
interface StepShared {
  host: TransformerParams | null;
  want: Promise<{ loss: number; gradNorm: number | null }> | null;
  readonly params: Map<WebGpuBackend, Promise<{ params: TransformerParams; opt: ReturnType<typeof adamwInit> }>>;
}

/** The host's parameters copied to a device (the same values the device would have drawn itself). */
async function uploaded(host: TransformerParams, gpu: WebGpuBackend): Promise<TransformerParams> {
  const leaves = await Promise.all(treeLeaves(host).map((t) => toBackend(t, gpu)));
  return treeUnflatten(host, leaves);
}

/** A device and the batching it runs a task under (`GPU_VARIANTS`). */
interface OnDevice {
  readonly gpu: WebGpuBackend;
  readonly variant: GpuVariant;
  /** Whether this task asks the peer and profiles its kernels (the first configuration of its size). */
  readonly first: boolean;
}

interface Batching {
  readonly dispatchesPerSubmit: number;
  readonly errorScopes: 'submit' | 'read';
}
const batchingOf = (variant: GpuVariant): Batching => {
  const v: WebGpuBackendOptions = GPU_VARIANTS[variant];
  return {
    dispatchesPerSubmit: v.dispatchesPerSubmit ?? DEFAULT_BATCHING.dispatchesPerSubmit,
    errorScopes: v.errorScopes ?? DEFAULT_BATCHING.errorScopes,
  };
};

/** The optimizer settings of every step task. */
const ADAMW: AdamWConfig = { lr: 1e-4, maxGradNorm: 1 };

/**
 * Whole SFT steps recorded once and replayed (`recordStep`): loss, gradients and AdamW, its values from a schedule
 * tensor each step, the weights and moments updated in place in the recording's slots.
 */
function replayedSteps(gpu: WebGpuBackend, c: TransformerConfig, batch: SequenceBatch) {
  type Inputs = { params: TransformerParams; m: TransformerParams; v: TransformerParams; schedule: Tensor };
  const whole = (s: Inputs) => {
    const [loss, grads] = valueAndGrad((q: TransformerParams) => sftLoss(q, c, batch))(s.params);
    // The host's count is a placeholder: the kernel reads the step's values from `schedule`.
    const out = adamwStep(s.params, grads, { step: 0, m: s.m, v: s.v }, ADAMW, { schedule: s.schedule, donate: true });
    return { loss, gradNorm: out.gradNorm, params: out.params, m: out.state.m, v: out.state.v };
  };
  let recorded: ReturnType<typeof recordStep<Inputs, ReturnType<typeof whole>>> | null = null;
  let state: { params: TransformerParams; m: TransformerParams; v: TransformerParams; steps: number } | null = null;
  const step = async () => {
    if (!recorded || !state) throw new Error('replayed steps: not started');
    const schedule = tensor(adamwScheduleValues(state.steps, ADAMW), [4], { backend: gpu });
    const out = recorded.run({ params: state.params, m: state.m, v: state.v, schedule });
    const encoded = gpu.stats();
    // The state given: taken back by the run if it was the last run's (lent), else copied in and let go here.
    dispose([schedule, state.params, state.m, state.v]);
    state = { params: out.params, m: out.m, v: out.v, steps: state.steps + 1 };
    const [loss, norm] = await Promise.all([out.loss.data(), out.gradNorm.data()]);
    dispose([out.loss, out.gradNorm]);
    return { loss: loss[0]!, norm: norm[0]!, encoded };
  };
  return {
    get ready() {
      return recorded !== null;
    },
    /** Record from `params` (taken over), and run the first step. */
    start: async (params: TransformerParams) => {
      const zeros = adamwInit(params);
      state = { params, m: zeros.m, v: zeros.v, steps: 0 };
      const schedule = tensor(adamwScheduleValues(0, ADAMW), [4], { backend: gpu });
      recorded = recordStep(gpu, whole, { params, m: state.m, v: state.v, schedule });
      schedule.dispose();
      await gpu.sync();
      return step();
    },
    step,
    dispose: () => {
      recorded?.dispose();
      if (state) dispose([state.params, state.m, state.v]);
      recorded = state = null;
    },
  };
}

function stepTask(
  on: OnDevice,
  cpu: Backend,
  size: ModelSize,
  label: string,
  checkGrads: boolean,
  shared: StepShared,
): Task {
  const { gpu, variant } = on;
  const c = size.config;
  const batch: SequenceBatch = batchFor(size);
  const tokens = batch.batchSize * (batch.promptLen + batch.completionLen);
  const name =
    `SFT step ${label}: d${c.dModel} L${c.nLayers} V${c.vocabSize} B${batch.batchSize}xT${tokens / batch.batchSize}` +
    (variant === 'default' ? '' : ` [${variant}]`);
  const hostParams = (): TransformerParams => {
    shared.host ??= paramsFor(c, cpu);
    return shared.host;
  };
  // Set by the first run (the upload is asynchronous).
  let params: TransformerParams;
  let opt: ReturnType<typeof adamwInit>;
  const checkLen = Math.min(16, size.seqLen);
  const checkBatch = batchFor({ ...size, seqLen: checkLen }, 1);
  let firstNorm: number | null = null;
  const reference = (): Promise<{ loss: number; gradNorm: number | null }> =>
    hostReference(name, async () => {
      const p = hostParams();
      if (checkGrads) {
        const [loss, grads] = valueAndGrad((q: TransformerParams) => sftLoss(q, c, batch))(p);
        const out = { loss: (await loss.data())[0]!, gradNorm: await gradNormOf(grads) };
        dispose([loss, grads]);
        return out;
      }
      // The f32 weights of the 0.6B size (2.8 GB) and a forward do not fit the CPU backend's 4 GiB (measured on
      // an H100 machine, even for one row of 32 tokens), so that size's loss is checked on the reference backend
      // (plain TypeScript, no such limit) over a 1 x 16-token batch through the same weights, which the GPU
      // scores too (untimed) before its first timed step.
      const loss = tidy(() => sftLoss(p, c, checkBatch));
      const out = { loss: (await loss.data())[0]!, gradNorm: null };
      dispose(loss);
      return out;
    });
  /** One step from the shared parameters (every step starts from them, so each one's loss and norm are checkable). */
  const eagerStep = async (): Promise<{ loss: number; norm: number; encoded: ReturnType<WebGpuBackend['stats']> }> => {
    const out = tidy(() => {
      const [loss, grads] = valueAndGrad((q: TransformerParams) => sftLoss(q, c, batch))(params);
      const stepped = adamwStep(params, grads, opt, ADAMW);
      return { loss, gradNorm: stepped.gradNorm, params: stepped.params, state: stepped.state };
    });
    const encoded = gpu.stats();
    const [loss, norm] = await Promise.all([out.loss.data(), out.gradNorm.data()]);
    dispose(out);
    return { loss: loss[0]!, norm: norm[0]!, encoded };
  };
  // The `replayed` variant: the whole step recorded once (recordStep) and replayed, on parameters of its own that
  // it trains in place (AdamW donated into the recording's slots, lent back and taken back each step).
  const replayed = variant === 'replayed' ? replayedSteps(gpu, c, batch) : null;
  const step = replayed ? () => replayed.step() : eagerStep;
  const task: Task = {
    name,
    unit: 'ms/step',
    figure: (ms) => ms,
    checked: checkGrads
      ? 'loss and gradient norm vs the CPU backend'
      : `loss of a 1 x ${checkLen}-token batch vs the ${cpu.name} backend; gradient norm equal across rounds`,
    counters: '',
    run: async () => {
      shared.want ??= reference();
      const want = await shared.want;
      let mine = shared.params.get(gpu);
      if (!mine) {
        mine = uploaded(hostParams(), gpu).then((p) => ({ params: p, opt: adamwInit(p) }));
        shared.params.set(gpu, mine);
      }
      ({ params, opt } = await mine);
      gpu.runtime.configure(batchingOf(variant));
      if (replayed && !replayed.ready) {
        // Recorded from a copy of the shared parameters, after a warm op-by-op step (tuned kernels), and checked:
        // the replayed step's loss and gradient norm equal the op-by-op step's bit for bit.
        await eagerStep();
        await gpu.sync();
        const eager = await eagerStep();
        const first = await replayed.start(await uploaded(hostParams(), gpu));
        check(name, 'replayed loss (against op by op)', [first.loss], [eager.loss], 0, 0);
        check(name, 'replayed gradient norm (against op by op)', [first.norm], [eager.norm], 0, 0);
      }
      if (want.gradNorm === null && firstNorm === null) {
        const small = tidy(() => sftLoss(params, c, checkBatch));
        check(name, `loss (1 x ${checkLen} tokens)`, [(await small.data())[0]!], [want.loss], 0, 1e-4);
        small.dispose();
      }
      const { ms, results, counters } = await timedSteps(gpu, step);
      for (const { loss, norm } of results) {
        // A replayed step trains its own parameters: its first step was checked against op by op's.
        if (replayed) {
          if (!Number.isFinite(loss) || !Number.isFinite(norm))
            throw new CheckError(`${name}: loss ${loss}, norm ${norm}`);
          continue;
        }
        // The loss tolerance of runtime-steady.spec.ts (GPU vs CPU over a whole step), for the norm too.
        if (want.gradNorm !== null) {
          check(name, 'loss', [loss], [want.loss], 0, 1e-4);
          check(name, 'gradient norm', [norm], [want.gradNorm], 0, 1e-4);
        } else if (!Number.isFinite(loss)) throw new CheckError(`${name}: the loss is ${loss}`);
        else if (firstNorm === null) firstNorm = norm;
        else check(name, 'gradient norm (against round 1)', [norm], [firstNorm], 0, 0);
      }
      task.counters = counters;
      return ms;
    },
    inspect: async () => {
      const rt = gpu.runtime;
      rt.configure(batchingOf(variant));
      await step(); // the pool in its steady state, as for a timed step
      await gpu.sync();
      const cpu0 = process.cpuUsage();
      rt.startTimeline();
      await step();
      const report = await rt.stopTimeline();
      const cpu = process.cpuUsage(cpu0);
      const lines = timelineLines(name, report, (cpu.user + cpu.system) / 1000);
      if (!on.first) return lines;
      const was = rt.profiling;
      if (!rt.setProfiling(true)) return [...lines, ...topKernelLines(name, null, 'the device has no timestamp-query')];
      rt.resetKernelCounts();
      await step();
      const times = await rt.kernelTimes();
      rt.setProfiling(was);
      return [...lines, ...topKernelLines(name, times, '')];
    },
    group: label,
    peer: on.first
      ? {
          task: 'step',
          row: [c.vocabSize, c.dModel, c.nLayers, c.nHeads, c.dFf, batch.batchSize, tokens / batch.batchSize],
          steps: STEPS_A_ROUND,
        }
      : null,
    dispose: () => {
      replayed?.dispose();
      const mine = shared.params.get(gpu);
      if (mine && shared.params.delete(gpu)) void mine.then((m) => dispose([m.params, m.opt]));
      if (shared.host && shared.params.size === 0) {
        dispose(shared.host);
        shared.host = null;
      }
    },
  };
  return task;
}

function sampleTask(gpu: WebGpuBackend, cpu: Backend, base: TransformerConfig, rows: number, newTokens: number): Task {
  const task0 = additionTask();
  const tokenizer = withoutEos(tokenizerFor(task0));
  const config: TransformerConfig = {
    ...base,
    vocabSize: Math.max(base.vocabSize, tokenizer.vocabSize),
    maxSeqLen: 16 + newTokens,
  };
  const prompts = sampleProblems(task0, Math.max(1, rows / 8), new Rng(2)).map((p) => p.prompt);
  const name = `KV-cache sampling d${config.dModel} L${config.nLayers}: ${prompts.length * 8} rows x ${newTokens} new`;
  const params = paramsFor(config, gpu);
  const cpuParams = paramsFor(config, cpu);
  let warm = false;
  const opts = { groupSize: 8, maxNewTokens: newTokens, temperature: 1 };
  const task: Task = {
    name,
    unit: 'tokens/s',
    figure: (ms) => (prompts.length * 8 * newTokens) / (ms / 1000),
    checked: "every sampled token's log-prob vs the CPU backend's scoring",
    counters: '',
    run: async (round) => {
      if (!warm) {
        await sampleRollouts(params, config, tokenizer, prompts, new Rng(9), { ...opts, maxNewTokens: 4 });
        warm = true;
      }
      const before = gpu.stats();
      const t0 = performance.now();
      const ro = await sampleRollouts(params, config, tokenizer, prompts, new Rng(3 + round), opts);
      const ms = performance.now() - t0;
      const after = gpu.stats();
      if (ro.completionLen !== newTokens) throw new CheckError(`${ro.completionLen} tokens, want ${newTokens}`);
      const lp = scoreLogProbs(cpuParams, config, ro);
      // The recorded log-probs are the decode's (KV cache, f32) and the CPU's a full forward: 1e-3 nats apart
      // at most, while a wrong or dropped kernel changes which tokens are likely.
      check(name, 'log-prob', ro.sampledLogProbs, await lp.data(), 1e-3, 0);
      lp.dispose();
      task.counters = `${((after.readBacks - before.readBacks) / newTokens).toFixed(2)} read-backs per token`;
      return ms;
    },
    peer: {
      task: 'sample',
      row: [config.vocabSize, config.dModel, config.nLayers, config.nHeads, config.dFf],
      rows: prompts.length * 8,
      prompt: 8,
      new: newTokens,
    },
    dispose: () => dispose([params, cpuParams]),
  };
  return task;
}

/** The quick mode's stand-ins: the trainer's default model, and a small model with a wider vocabulary. */
const QUICK_0_6B: ModelSize = {
  name: 'quick-wide',
  torchRow: '(quick stand-in for 0.6B)',
  config: smallConfig(2048, { dModel: 64, nLayers: 2, nHeads: 4, nKvHeads: 4, dFf: 128, maxSeqLen: 32, rmsEps: 1e-6 }),
  batch: 2,
  seqLen: 16,
  small: true,
};

export async function runBenchGpu(o: BenchGpuOptions = {}): Promise<BenchRow[]> {
  const log = o.log ?? ((line: string) => console.log(line));
  const quick = o.quick ?? false;
  const rounds = o.rounds ?? (quick ? 2 : 3);
  const variants: readonly GpuVariant[] = o.variants ?? ['default', 'replayed'];
  // One device per set of Dawn toggles the configurations need (the batching is switched on a live runtime).
  const fastOf = (v: GpuVariant): boolean | undefined =>
    (GPU_VARIANTS[v] as WebGpuBackendOptions).fast ?? o.backend?.fast;
  const devices = new Map<boolean | undefined, WebGpuBackend>();
  for (const v of variants)
    if (!devices.has(fastOf(v))) devices.set(fastOf(v), await createWebGpuBackend({ ...o.backend, fast: fastOf(v) }));
  const gpu = devices.get(fastOf(variants[0]!))!;
  const cpu = new CpuBackend();
  // The wide-vocabulary steps' loss check runs on the reference backend (see stepTask).
  const reference = new ReferenceBackend();
  const peer = o.peer === false ? 'not asked for' : await TorchPeer.start();
  try {
    printHeader('bench:gpu', gpu, log);
    log(`features: ${[...gpu.runtime.device.features].sort().join(', ') || '(none)'}`);
    for (const line of await probeFeatures()) log(line);
    // npm webgpu's issue 17: a busy poll of the main thread once a device exists. Measured, not assumed.
    const idle0 = process.cpuUsage();
    await new Promise((r) => setTimeout(r, 1000));
    const idle = process.cpuUsage(idle0);
    log(`host CPU with the devices open and idle: ${((idle.user + idle.system) / 1000).toFixed(0)} ms in 1 s`);
    log(
      `runtime configurations: ${variants
        .map((v) => {
          const b = batchingOf(v);
          const d = devices.get(fastOf(v))!;
          return `${v} (${b.dispatchesPerSubmit >= 1e6 ? 'submit at reads' : `${b.dispatchesPerSubmit} dispatches a submit`}, error scopes per ${b.errorScopes}, Dawn toggles: ${d.adapter.toggles.join(', ') || 'none'})`;
        })
        .join('; ')}`,
    );
    const t = gpu.runtime.tuner;
    log(
      t.enabled
        ? `tuning: on (${gpu.runtime.device.features.has('timestamp-query') ? 'timestamp-query' : 'wall clock'}; ` +
            `cache ${t.cacheFile ?? 'in memory only'}; ${t.report().length} classes loaded)`
        : 'tuning: off (RLVR_TUNE=off): fixed default configurations',
    );
    log(typeof peer === 'string' ? `PyTorch peer: absent (${peer})` : `PyTorch peer: ${peer.description}`);
    log(
      `${rounds} interleaved rounds${quick ? ' (--quick: tiny sizes)' : ''}; each result checked before its time counts`,
    );
    const medium = MODEL_SIZES.find((s) => s.name === 'medium')!;
    const real = MODEL_SIZES.find((s) => s.name === '0.6b')!;
    // Made only for the kinds asked for (--tasks matmul,step,sample,lora,f16: a subset, where a session has less time).
    const kinds = o.tasks ?? BENCH_GPU_TASKS;
    // A step task per configuration, in the same rounds; they share the host reference and, per device, the
    // parameters.
    const steps = (size: ModelSize, label: string, host: Backend, checkGrads: boolean): [string, () => Task][] => {
      const shared: StepShared = { host: null, want: null, params: new Map() };
      return variants.map((variant, i) => [
        'step',
        () =>
          stepTask(
            { gpu: devices.get(fastOf(variant))!, variant, first: i === 0 },
            host,
            size,
            label,
            checkGrads,
            shared,
          ),
      ]);
    };
    // The LoRA step and rollout of one size share its weights (bench/lib/lora-gpu.ts).
    const lora = (size: ModelSize, label: string, rollout: LoraRollout): [string, () => Task][] => {
      const made = loraTasks(gpu, size, label, rollout);
      return [
        ['lora', made.step],
        ['lora', made.rollout],
      ];
    };
    const fastDevice = devices.get(true) !== gpu ? (devices.get(true) ?? null) : null;
    const made: [string, () => Task][] = quick
      ? [
          ['matmul', () => matmulTask(gpu, cpu, 64)],
          ['matmul', () => matmulTask(gpu, cpu, 128)],
          ...steps(MODEL_SIZES.find((s) => s.name === 'default')!, 'default (quick)', cpu, true),
          ...steps(QUICK_0_6B, 'wide vocab (quick)', reference, false),
          ['sample', () => sampleTask(gpu, cpu, smallConfig(24), 16, 8)],
          ...lora(QUICK_0_6B, '(quick stand-in)', { rows: 16, newTokens: 8, checkRows: 'all' }),
        ]
      : [
          ...[1024, 2048, 4096].map((n): [string, () => Task] => ['matmul', () => matmulTask(gpu, cpu, n)]),
          // And on a device with Dawn's fast toggles, where a configuration asks for one (robustness's bounds
          // clamps cost the step's kernels a quarter of their time on an H100).
          ...(fastDevice
            ? [4096].map((n): [string, () => Task] => ['matmul', () => matmulTask(fastDevice, cpu, n, ' [fast]')])
            : []),
          ...steps(medium, 'd512 L8', cpu, true),
          ...steps(real, 'Qwen3-0.6B size', reference, false),
          ['sample', () => sampleTask(gpu, cpu, medium.config, 16, 128)],
          ...lora(real, 'Qwen3-0.6B size', { rows: 16, newTokens: 128, checkRows: 'group-firsts' }),
        ];
    const tasks = made.filter(([kind]) => kinds.includes(kind)).map(([, make]) => make());
    // Half precision on the matrix units, on a device of its own (bench/lib/subgroup-matrix.ts).
    if (kinds.includes('f16')) {
      const probe = await subgroupMatrixTasks(quick ? 256 : 4096, fastDevice ? [true, false] : [true]);
      for (const line of probe.lines) log(line);
      tasks.push(...probe.tasks);
    }
    const started = performance.now();
    // Seconds of rounds: the given ones, or by default DEFAULT_ROUND_SECONDS (so that one plain run, setup
    // included, fits a GPU slot of 8 minutes); --quick runs its rounds.
    const budget = o.seconds ?? (quick ? undefined : DEFAULT_ROUND_SECONDS);
    let roundStart = 0;
    const ours = new Map<Task, number[]>(tasks.map((k) => [k, []]));
    const theirs = new Map<Task, number[]>(tasks.map((k) => [k, []]));
    const absent = new Map<Task, string>();
    const failed = new Map<Task, string>();
    /** The task that asks the peer for `task`'s group (its first configuration), or `task` itself. */
    const peerSource = (task: Task): Task =>
      tasks.find((k) => k.group !== undefined && k.group === task.group && k.peer !== null) ?? task;
    /** Each task's row from the rounds so far (a task not yet run reads "-"). */
    function rowsNow(): BenchRow[] {
      return tasks.map((task) => {
        const why = failed.get(task);
        const r = { task: task.name, unit: task.unit, ours: Number.NaN, torch: null, speedRatio: null };
        if (why !== undefined) return { ...r, checked: `CHECK FAILED: ${why}`, counters: task.counters };
        if (ours.get(task)!.length === 0) return { ...r, checked: 'not run', counters: '' };
        const ms = median(ours.get(task)!);
        // A configuration other than its group's first is compared with the peer's times asked by that first.
        const source = peerSource(task);
        const peerMs = theirs.get(source)!.length > 0 ? median(theirs.get(source)!) : null;
        return {
          task: task.name,
          unit: task.unit,
          ours: task.figure(ms),
          torch: peerMs === null ? null : task.figure(peerMs),
          speedRatio: peerMs === null ? null : peerMs / ms,
          checked: task.checked,
          counters: task.counters,
        };
      });
    }
    function printTable(rows: readonly BenchRow[]): void {
      const fmt = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toFixed(2));
      log('');
      log('| task | ours | PyTorch | unit | ours/PyTorch (speed) | checked | counters (last round) |');
      log('|---|---|---|---|---|---|---|');
      for (const [i, r] of rows.entries()) {
        const why = absent.get(peerSource(tasks[i]!));
        log(
          `| ${r.task} | ${Number.isNaN(r.ours) ? '-' : fmt(r.ours)} | ${r.torch === null ? (why ? `absent: ${why}` : 'absent') : fmt(r.torch)} | ${r.unit} | ` +
            `${r.speedRatio === null ? '-' : `${r.speedRatio.toFixed(2)}x`} | ${r.checked} | ${r.counters} |`,
        );
      }
    }
    for (let round = 0; round < rounds; round++) {
      for (const task of tasks) {
        if (failed.has(task)) continue;
        try {
          const t0 = performance.now();
          ours.get(task)!.push(await task.run(round));
          // The first round's tasks one by one: on a fresh device it holds the pipelines, tuning and references.
          if (round === 0) log(`  ${task.name}: first run done in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        } catch (e) {
          if (!(e instanceof CheckError)) throw e;
          failed.set(task, e.message);
          log(`${task.name}: CHECK FAILED (its times do not count): ${e.message}`);
          continue;
        }
        if (typeof peer !== 'string' && task.peer !== null && !absent.has(task)) {
          const a: PeerAnswer = await peer.ask(task.peer);
          if ('absent' in a) absent.set(task, a.absent);
          else theirs.get(task)!.push(a.ms);
        }
      }
      const seconds = (performance.now() - started) / 1000;
      log(`round ${round + 1}/${rounds} done (${seconds.toFixed(0)} s in all)`);
      // A round that would end past the budget is not started (rounds take about the same time each).
      const lastRound = seconds - roundStart;
      roundStart = seconds;
      if (round + 1 < rounds && budget !== undefined && seconds + lastRound > budget) {
        log(
          `no more rounds: another (${lastRound.toFixed(0)} s) would end past --seconds ${budget} ` +
            `after round ${round + 1}`,
        );
        break;
      }
      // The table so far after each round but the last: a run its machine stops early keeps its rounds.
      if (round + 1 < rounds) {
        log(`table after round ${round + 1} (medians so far):`);
        printTable(rowsNow());
      }
    }
    const rows = rowsNow();
    printTable(rows);
    log('');
    log('where the time goes (one more step of each, untimed):');
    for (const task of tasks) if (task.inspect && !failed.has(task)) for (const line of await task.inspect()) log(line);
    const tuned = t.report();
    log('');
    log(
      tuned.length === 0
        ? 'tuned configurations: none (tuning off, or no class large enough to tune)'
        : `tuned configurations (${t.tuned} classes tuned in this run, ${(t.tuningMs / 1000).toFixed(1)} s; ` +
            `kernel | shape class | choice | its ms | default ms | rejected):`,
    );
    for (const c of tuned) {
      const def = c.fallback;
      log(
        `  ${c.kernel} | ${c.shapeClass} | ${c.choice} | ${c.ms[c.choice]!.toPrecision(3)} | ${def} ${c.ms[def]!.toPrecision(3)} | ` +
          `${c.rejected.join(', ') || '-'}`,
      );
    }
    if (gpu.runtime.tuner.saveError) log(`tuning cache not saved: ${gpu.runtime.tuner.saveError}`);
    for (const task of tasks) task.dispose();
    for (const d of devices.values()) await d.sync(); // throws if anything recorded a GPU error during the run
    return rows;
  } finally {
    if (typeof peer !== 'string') peer.close();
    cpu.dispose();
    reference.dispose();
    for (const d of devices.values()) d.dispose();
  }
}

/** The default budget of rounds (`--seconds`): an H200's three parts took 100 + 92 + 60 s for three rounds. */
export const DEFAULT_ROUND_SECONDS = 360;

/** The kinds of task `--tasks` chooses from. */
export const BENCH_GPU_TASKS = ['matmul', 'step', 'sample', 'lora', 'f16'] as const;
const BENCH_GPU_FLAGS: Readonly<Record<string, FlagKind>> = {
  quick: 'switch',
  rounds: 'number',
  seconds: 'number',
  tasks: 'text',
  variants: 'text',
};
/** The most rounds `--rounds` takes (each round runs every task: more is a typo, not a benchmark). */
const MAX_ROUNDS = 1000;

/** A bad argument of bench:gpu: the flag, the value typed and why, as one line. */
export class BenchArgumentError extends FieldError {
  constructor(field: string, value: unknown, reason: string) {
    super(field, value, reason, `${field}${value === null ? '' : ` = ${quoteValue(value)}`} ${reason}`);
  }
}

/**
 * `npm run bench:gpu`'s arguments, scanned by `rlvr train`'s scanner (`scanFlags`: unknown flags, stray or missing
 * values and repeats are refused by name) and its decimal numbers: `--quick`, `--rounds N` (a whole number in
 * 1..1000), `--tasks LIST` (some of matmul, step, sample, lora, f16). `--rounds abc` once ran "NaN interleaved rounds",
 * `--rounds 0` and `--tasks bogus` an empty table, all with exit 0.
 */
export function parseBenchGpuArgs(argv: readonly string[]): E.Either<BenchArgumentError, BenchGpuOptions> {
  const variantNames = Object.keys(GPU_VARIANTS) as GpuVariant[];
  const listed =
    `it takes --quick, --rounds N, --seconds S, --tasks ${BENCH_GPU_TASKS.join(',')}, ` +
    `--variants ${variantNames.join(',')} (or all)`;
  const scanned = scanFlags(argv, {
    kindOf: (name) => (Object.hasOwn(BENCH_GPU_FLAGS, name) ? BENCH_GPU_FLAGS[name] : undefined),
    command: 'bench:gpu',
    listed,
    error: (field, value, why) => new BenchArgumentError(field, value, why),
  });
  if (E.isLeft(scanned)) return scanned;
  const rounds = scanned.right.get('rounds');
  const tasks = scanned.right.get('tasks');
  const variants = scanned.right.get('variants');
  const seconds = scanned.right.get('seconds');
  const options: { quick: boolean; rounds?: number; seconds?: number; tasks?: string[]; variants?: GpuVariant[] } = {
    quick: scanned.right.has('quick'),
  };
  if (typeof variants === 'string') {
    const names = variants.trim() === 'all' ? variantNames : variants.split(',').map((v) => v.trim());
    const unknown = names.find((v) => !(variantNames as string[]).includes(v));
    if (unknown !== undefined)
      return E.left(
        new BenchArgumentError(
          '--variants',
          variants,
          `names ${quoteValue(unknown)}, not one of ${variantNames.join(', ')} (or all)`,
        ),
      );
    options.variants = [...new Set(names as GpuVariant[])];
  }
  if (typeof rounds === 'string') {
    const n = decimal(rounds);
    if (!(Number.isInteger(n) && n >= 1 && n <= MAX_ROUNDS))
      return E.left(new BenchArgumentError('--rounds', rounds, `must be a whole number in 1..${MAX_ROUNDS}`));
    options.rounds = n;
  }
  if (typeof seconds === 'string') {
    const n = decimal(seconds);
    if (!(Number.isFinite(n) && n > 0))
      return E.left(new BenchArgumentError('--seconds', seconds, 'must be a positive number of seconds'));
    options.seconds = n;
  }
  if (typeof tasks === 'string') {
    const names = tasks.split(',').map((t) => t.trim());
    const unknown = names.find((t) => !(BENCH_GPU_TASKS as readonly string[]).includes(t));
    if (unknown !== undefined)
      return E.left(
        new BenchArgumentError(
          '--tasks',
          tasks,
          `names ${quoteValue(unknown)}, not one of ${BENCH_GPU_TASKS.join(', ')}`,
        ),
      );
    options.tasks = [...new Set(names)];
  }
  return E.right(options);
}

if (process.argv[1]?.endsWith('gpu.bench.js')) {
  const args = parseBenchGpuArgs(process.argv.slice(2));
  if (E.isLeft(args)) {
    // As rlvr's usage errors: one line, exit 2, before a device is opened.
    console.error(`bench:gpu: ${args.left.message}`);
    process.exitCode = 2;
  } else {
    const rows = await runBenchGpu(args.right);
    // The table is printed either way; a failed check still fails the command.
    if (rows.some((r) => r.checked.startsWith('CHECK FAILED'))) process.exitCode = 1;
  }
}
