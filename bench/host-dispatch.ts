/**
 * The host's cost of a dispatch in a training step, against the floor Dawn sets: the same device encoding
 * bare dispatches (setPipeline, setBindGroup, dispatchWorkgroups, alternating two pipelines and four bind
 * groups, so none is skipped as unchanged), with nothing of ours around them. Issue 36's target is 10 us a
 * dispatch; no JavaScript can go below the floor.
 *
 * The step is an SFT step (forward, backward, AdamW with clipping) with the d512 L8 model's structure at a width
 * the CPU rasterizer gets through quickly (--d 64 by default; dispatch counts do not depend on the width, the
 * batch or the length), timed by the runtime's timeline: the host's part is everything until the last submit
 * returns, less the time inside submits (where Dawn's OpenGL path hands the work to the rasterizer). Rounds
 * interleave the step and the floor. The step's first loss is checked against the reference backend's, and the
 * floor's kernel output is read back and checked.
 *
 * Run: node esbuild.config.mjs && node dist/bench/host-dispatch.js [--d 64] [--rounds 6] [--steps 20]
 * On llvmpipe, LP_NUM_THREADS=0 keeps the rasterizer's threads off the cores the host's time is measured on.
 */
import {
  createWebGpuBackend,
  dispose,
  recordStep,
  type Tensor,
  tensor,
  ReferenceBackend,
  Rng,
  tidy,
  treeLeaves,
  valueAndGrad,
  type WebGpuBackend,
} from '../src/index.js';
import {
  type AdamWConfig,
  adamwInit,
  adamwScheduleValues,
  adamwStep,
  initParams,
  type OptimizerState,
  smallConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../src/nn/index.js';
import { packSequences, sftLoss } from '../src/rl/index.js';
import type { DawnGlobals } from '../src/backends/webgpu/device.js';

const arg = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!Number.isInteger(v) || v <= 0) {
    console.error(`--${name}: a positive integer, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
};
const d = arg('d', 64);
const rounds = arg('rounds', 6);
const steps = arg('steps', 20);

const config: TransformerConfig = { ...smallConfig(1024), dModel: d, nLayers: 8, nHeads: 8, nKvHeads: 8, dFf: 3 * d };
const ids = (n: number, k: number): number[] => Array.from({ length: n }, (_, i) => 1 + ((i * k) % 1023));
const batch = packSequences([ids(6, 7)], [ids(10, 11)], 0);

/** The model and optimizer state a round steps on (each step replaces both). */
interface Training {
  params: TransformerParams;
  opt: OptimizerState<TransformerParams>;
}

const adamw: AdamWConfig = { lr: 1e-4, maxGradNorm: 1 };

/** The loss and its gradients, the part of a step `recordStep` records without AdamW. */
const lossAndGrads = (p: TransformerParams) => {
  const [loss, grads] = valueAndGrad((q: TransformerParams) => sftLoss(q, config, batch))(p);
  return { loss, grads };
};

/** What a whole recorded step takes: the model, the moments and this step's AdamW values (`adamwScheduleValues`). */
type StepInputs = { params: TransformerParams; m: TransformerParams; v: TransformerParams; schedule: Tensor };
/** A whole step with AdamW's values read from `schedule` (the host's lr and count are placeholders). */
const wholeStep = (s: StepInputs) => {
  const { loss, grads } = lossAndGrads(s.params);
  // Donated: the update lands in the inputs' own slots, which the recorded step lends out instead of copying.
  const out = adamwStep(s.params, grads, { step: 0, m: s.m, v: s.v }, adamw, { schedule: s.schedule, donate: true });
  return { loss, params: out.params, m: out.state.m, v: out.state.v };
};

/** One training step from `state`: its loss and the next state (tensors the round disposes). */
type Step = (state: Training) => { loss: Tensor; params: TransformerParams; opt: OptimizerState<TransformerParams> };

/** Host microseconds a dispatch over `steps` SFT steps, and the dispatches a step. */
async function stepRound(gpu: WebGpuBackend, state: Training, step: Step): Promise<[number, number]> {
  const rt = gpu.runtime;
  let hostMs = 0;
  let dispatches = 0;
  for (let s = 0; s < steps; s++) {
    rt.startTimeline();
    const out = tidy(() => step(state));
    await out.loss.data();
    const report = await rt.stopTimeline();
    hostMs += report.untilLastSubmitMs - report.submitMs;
    dispatches += report.dispatches;
    dispose([state.params, state.opt, out.loss]);
    state.params = out.params;
    state.opt = out.opt;
  }
  return [(1000 * hostMs) / dispatches, dispatches / steps];
}

/** Op by op: every op through the op layer, AdamW's values as uniforms. */
const opByOp: Step = ({ params, opt }) => {
  const { loss, grads } = lossAndGrads(params);
  const out = adamwStep(params, grads, opt, adamw);
  out.gradNorm.dispose();
  return { loss, params: out.params, opt: out.state };
};

const FLOOR_WGSL = `@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3u) { if (g.x < 64u) { a[g.x] = b[g.x] + 1.0; } }`;

/** npm `webgpu`'s constants (Node has no GPUBufferUsage or GPUMapMode global). */
const { GPUBufferUsage: USAGE, GPUMapMode: MAP } = ((await import('webgpu')) as unknown as { globals: DawnGlobals })
  .globals;

/** Dawn's calls alone: microseconds a dispatch of `n` encoded bare; the last kernel's output checked. */
async function floorRound(device: GPUDevice, n: number): Promise<number> {
  const module = device.createShaderModule({ code: FLOOR_WGSL, label: 'bench:floor' });
  const pipelines = [0, 1].map(() =>
    device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } }),
  );
  const usage = USAGE.STORAGE | USAGE.COPY_SRC | USAGE.COPY_DST;
  const buffers = Array.from({ length: 8 }, () => device.createBuffer({ size: 256, usage }));
  const input = new Float32Array(64).map((_, i) => i * 0.5);
  for (const buf of buffers) device.queue.writeBuffer(buf, 0, input);
  const groups = pipelines.map((p) =>
    Array.from({ length: 4 }, (_, i) =>
      device.createBindGroup({
        layout: p.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: buffers[2 * i]! } },
          { binding: 1, resource: { buffer: buffers[2 * i + 1]! } },
        ],
      }),
    ),
  );
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    pass.setPipeline(pipelines[i & 1]!);
    pass.setBindGroup(0, groups[i & 1]![i & 3]!);
    pass.dispatchWorkgroups(1);
  }
  const us = (1000 * (performance.now() - t0)) / n;
  pass.end();
  const staging = device.createBuffer({ size: 256, usage: USAGE.MAP_READ | USAGE.COPY_DST });
  encoder.copyBufferToBuffer(buffers[6]!, 0, staging, 0, 256);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(MAP.READ);
  const got = new Float32Array(staging.getMappedRange().slice(0));
  staging.unmap();
  for (const buf of [...buffers, staging]) buf.destroy();
  got.forEach((v, i) => {
    if (v !== input[i]! + 1) throw new Error(`floor kernel: a[${i}] = ${v}, want ${input[i]! + 1}`);
  });
  return us;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

const gpu = await createWebGpuBackend();
const rng = () => new Rng(0);
const initial = initParams(config, rng(), { backend: gpu });
const state: Training = { params: initial, opt: adamwInit(initial) };
// The first loss against the reference backend's (same seed, same batch).
{
  const ref = new ReferenceBackend();
  const refParams = initParams(config, rng(), { backend: ref });
  const want = sftLoss(refParams, config, batch).dataSync()[0]!;
  const got = (await tidy(() => sftLoss(state.params, config, batch)).data())[0]!;
  if (!(Math.abs(got - want) <= 1e-4 * Math.abs(want))) throw new Error(`step loss ${got}, reference ${want}`);
  console.log(`check: first loss ${got.toFixed(6)} (reference backend ${want.toFixed(6)})`);
}
await stepRound(gpu, state, opByOp); // warm: pipelines, pool sizes, bind groups, tuned classes
await gpu.sync();
const recordedGrads = recordStep(gpu, lossAndGrads, state.params);
const scheduleOf = (opt: OptimizerState<TransformerParams>) =>
  tensor(adamwScheduleValues(opt.step, adamw), [4], { backend: gpu });
const firstSchedule = scheduleOf(state.opt);
const recordedWhole = recordStep(gpu, wholeStep, {
  params: state.params,
  m: state.opt.m,
  v: state.opt.v,
  schedule: firstSchedule,
});
firstSchedule.dispose();
const gradsReplayed: Step = ({ params, opt }) => {
  const { loss, grads } = recordedGrads.run(params);
  const out = adamwStep(params, grads, opt, adamw);
  out.gradNorm.dispose();
  return { loss, params: out.params, opt: out.state };
};
const wholeReplayed: Step = ({ params, opt }) => {
  const out = recordedWhole.run({ params, m: opt.m, v: opt.v, schedule: scheduleOf(opt) });
  return { loss: out.loss, params: out.params, opt: { step: opt.step + 1, m: out.m, v: out.v } };
};
// Each replayed step against the op-by-op one from the same state: the same kernels, so the same bits.
for (const [name, replayed] of [
  ['loss and gradients', gradsReplayed],
  ['whole step', wholeReplayed],
] as const) {
  const [a, b] = [tidy(() => opByOp(state)), tidy(() => replayed(state))];
  const [xs, ys] = [
    [a.loss, ...treeLeaves(a.params)],
    [b.loss, ...treeLeaves(b.params)],
  ];
  for (let i = 0; i < xs.length; i++) {
    const [x, y] = [await xs[i]!.data(), await ys[i]!.data()];
    const at = x.findIndex((v, k) => !Object.is(v, y[k]));
    if (at >= 0) throw new Error(`${name} replayed: output ${i} differs at ${at}: ${y[at]} against ${x[at]} op by op`);
  }
  console.log(`check: ${name} replayed: the loss and ${xs.length - 1} updated parameters equal op by op's bit for bit`);
  dispose([a, b]);
}
for (const warm of [gradsReplayed, wholeReplayed]) await stepRound(gpu, state, warm); // the replays' output sizes
console.log(`adapter: ${gpu.adapter.summary}; node ${process.version}; d${d} L8 structure, 1 x 16 tokens`);
const variants = [
  ['op by op', opByOp],
  ['loss and gradients replayed, AdamW op by op', gradsReplayed],
  ['whole step replayed (recordStep, AdamW values from a schedule tensor)', wholeReplayed],
] as const;
const times: number[][] = variants.map(() => []);
const perStep: number[] = variants.map(() => 0);
const floor: number[] = [];
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < variants.length; k++) {
    const [us, n] = await stepRound(gpu, state, variants[k]![1]);
    times[k]!.push(us);
    perStep[k] = n;
  }
  floor.push(await floorRound(gpu.runtime.device, 4000));
  console.log(
    `round ${r + 1}: ${variants.map(([name], k) => `${name} ${times[k]![r]!.toFixed(1)}`).join(', ')}; ` +
      `Dawn's bare calls ${floor[r]!.toFixed(1)} us a dispatch`,
  );
}
const summary = (xs: readonly number[]) => `min ${Math.min(...xs).toFixed(1)} / median ${median(xs).toFixed(1)} us`;
for (let k = 0; k < variants.length; k++)
  console.log(
    `host a dispatch, ${variants[k]![0]}: ${summary(times[k]!)} (${perStep[k]} dispatches a step; ` +
      `${((median(times[k]!) * perStep[k]!) / 1000).toFixed(2)} ms a step; ${(median(times[k]!) / median(floor)).toFixed(2)}x the floor)`,
  );
console.log(`Dawn's floor: ${summary(floor)}; issue 36's target: 10 us a dispatch`);
recordedGrads.dispose();
recordedWhole.dispose();

dispose([state.params, state.opt]);
gpu.dispose();
