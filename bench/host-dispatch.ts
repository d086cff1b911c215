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
  ReferenceBackend,
  Rng,
  tidy,
  treeLeaves,
  valueAndGrad,
  type WebGpuBackend,
} from '../src/index.js';
import {
  adamwInit,
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

/** The loss and its gradients, the part of a step `recordStep` records (AdamW's step count changes each step). */
const lossAndGrads = (p: TransformerParams) => {
  const [loss, grads] = valueAndGrad((q: TransformerParams) => sftLoss(q, config, batch))(p);
  return { loss, grads };
};
type LossAndGrads = (p: TransformerParams) => { loss: Tensor; grads: TransformerParams };

/** Host microseconds a dispatch over `steps` SFT steps, and the dispatches a step. */
async function stepRound(gpu: WebGpuBackend, state: Training, forward: LossAndGrads): Promise<[number, number]> {
  const rt = gpu.runtime;
  let hostMs = 0;
  let dispatches = 0;
  for (let s = 0; s < steps; s++) {
    rt.startTimeline();
    const { params, opt } = state;
    const out = tidy(() => {
      const { loss, grads } = forward(params);
      return { loss, ...adamwStep(params, grads, opt, { lr: 1e-4, maxGradNorm: 1 }) };
    });
    await out.loss.data();
    const report = await rt.stopTimeline();
    hostMs += report.untilLastSubmitMs - report.submitMs;
    dispatches += report.dispatches;
    dispose([params, opt, out.loss, out.gradNorm]);
    state.params = out.params;
    state.opt = out.state;
  }
  return [(1000 * hostMs) / dispatches, dispatches / steps];
}

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
await stepRound(gpu, state, lossAndGrads); // warm: pipelines, pool sizes, bind groups, tuned classes
await gpu.sync();
const recorded = recordStep(gpu, lossAndGrads, state.params);
// The replayed loss and gradients against the op-by-op ones on the same parameters: the same kernels, bit for bit.
{
  const eager = tidy(() => lossAndGrads(state.params));
  const replayed = tidy(() => recorded.run(state.params));
  const [a, b] = [
    [eager.loss, ...treeLeaves(eager.grads)],
    [replayed.loss, ...treeLeaves(replayed.grads)],
  ];
  for (let i = 0; i < a.length; i++) {
    const [x, y] = [await a[i]!.data(), await b[i]!.data()];
    const at = x.findIndex((v, k) => !Object.is(v, y[k]));
    if (at >= 0) throw new Error(`replayed step: output ${i} differs at ${at}: ${y[at]} against ${x[at]} op by op`);
  }
  console.log(`check: the replayed loss and ${a.length - 1} gradients equal the op-by-op ones bit for bit`);
  dispose([eager, replayed]);
}
await stepRound(gpu, state, (p) => recorded.run(p)); // warm the replay's output sizes
console.log(`adapter: ${gpu.adapter.summary}; node ${process.version}; d${d} L8 structure, 1 x 16 tokens`);
const ours: number[] = [];
const replays: number[] = [];
const floor: number[] = [];
let perStep = 0;
let perReplay = 0;
for (let r = 0; r < rounds; r++) {
  const [us, n] = await stepRound(gpu, state, lossAndGrads);
  ours.push(us);
  perStep = n;
  const [rus, rn] = await stepRound(gpu, state, (p) => recorded.run(p));
  replays.push(rus);
  perReplay = rn;
  floor.push(await floorRound(gpu.runtime.device, 4000));
  console.log(
    `round ${r + 1}: step ${us.toFixed(1)} us a dispatch (${n} a step), replayed ${rus.toFixed(1)} (${rn}), Dawn's bare calls ${floor[r]!.toFixed(1)} us`,
  );
}
const summary = (xs: readonly number[]) => `min ${Math.min(...xs).toFixed(1)} / median ${median(xs).toFixed(1)} us`;
console.log(
  `host a dispatch: op by op ${summary(ours)} (${perStep} dispatches a step); ` +
    `loss and gradients replayed (recordStep), AdamW op by op ${summary(replays)} (${perReplay}); ` +
    `Dawn's floor ${summary(floor)}; op by op / floor ${(median(ours) / median(floor)).toFixed(2)}x, ` +
    `replayed / floor ${(median(replays) / median(floor)).toFixed(2)}x (medians); issue 36's target: 10 us`,
);
recorded.dispose();
dispose([state.params, state.opt]);
gpu.dispose();
