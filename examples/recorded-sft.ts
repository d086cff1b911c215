/**
 * A supervised warm-start of the addition task on WebGPU with its training step recorded once and replayed
 * (`recordStep`, as a CUDA graph): the loss, the gradients and AdamW run as one recorded list of dispatches, with
 * nothing of the op layer between them. A recording is for one set of shapes, so the steps keep one per batch
 * shape (as `jax.jit` caches one per shape), made at the shape's second step, after its kernels are tuned; the
 * addition task's batches take one.
 *
 * Each step's inputs: the weights and AdamW's moments (the recording's own, lent to the loop and taken back each
 * step, never copied), AdamW's values of the step (`adamwScheduleValues`) and the batch (`batchTensors`). The first
 * replayed steps also run op by op from the same state, and must agree bit for bit.
 *
 *   npm run example:recorded [-- --steps 300 --batch 32 --seed 0]
 */
import { parseArgs } from 'node:util';
import {
  type AdamWConfig,
  adamwInit,
  adamwScheduleValues,
  adamwStep,
  additionTask,
  type BatchTensors,
  batchTensors,
  createWebGpuBackend,
  dispose,
  initParams,
  type RecordedStep,
  recordStep,
  Rng,
  sampleProblems,
  sftBatch,
  sftExamples,
  sftLoss,
  smallConfig,
  type Tensor,
  tensor,
  tidy,
  tokenizerFor,
  type TransformerParams,
  treeLeaves,
  valueAndGrad,
} from '../src/index.js';

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '300' },
    batch: { type: 'string', default: '32' },
    seed: { type: 'string', default: '0' },
  },
});
const [steps, batchSize, seed] = [Number(values.steps), Number(values.batch), Number(values.seed)];
for (const [flag, v] of [
  ['--steps', steps],
  ['--batch', batchSize],
] as const) {
  if (!Number.isInteger(v) || v <= 0) {
    console.error(`${flag}: a positive integer, got ${v}`);
    process.exit(2);
  }
}

const task = additionTask();
const tokenizer = tokenizerFor(task);
const config = smallConfig(tokenizer.vocabSize);
const adamw: AdamWConfig = {
  lr: 0,
  maxGradNorm: 1,
  schedule: { peakLr: 3e-3, warmupSteps: 20, totalSteps: steps, minLr: 3e-4 },
};

type Inputs = {
  params: TransformerParams;
  m: TransformerParams;
  v: TransformerParams;
  schedule: Tensor;
  batch: BatchTensors;
};
/** One whole step, AdamW's values read from `schedule` (the host count is a placeholder); `donate`: in place. */
const stepOf = (donate: boolean) => (s: Inputs) => {
  const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, config, s.batch))(s.params);
  const out = adamwStep(s.params, grads, { step: 0, m: s.m, v: s.v }, adamw, { schedule: s.schedule, donate });
  return { loss, params: out.params, m: out.state.m, v: out.state.v };
};
const step = stepOf(true);

const gpu = await createWebGpuBackend();
console.log(`adapter: ${gpu.adapter.summary}`);
const rng = new Rng(seed);
const params = initParams(config, new Rng(seed), { backend: gpu });
let state = { params, ...adamwInit(params) };
const recordings = new Map<string, RecordedStep<Inputs, ReturnType<typeof step>> | null>();
let checked = 0;
const losses: number[] = [];
const t0 = performance.now();
for (let n = 0; n < steps; n++) {
  const batch = sftBatch(tokenizer, sftExamples(task, sampleProblems(task, batchSize, rng)));
  const inputs = {
    params: state.params,
    m: state.m,
    v: state.v,
    schedule: tensor(adamwScheduleValues(n, adamw), [4], { backend: gpu }),
    batch: batchTensors(batch, gpu),
  };
  const shape = `${batch.promptLen}x${batch.completionLen}`;
  // A shape's first step runs op by op (the kernels it meets are tuned at its end); its second records it.
  let recorded = recordings.get(shape);
  if (recorded === null) {
    recorded = recordStep(gpu, step, inputs);
    recordings.set(shape, recorded);
  } else if (recorded === undefined) recordings.set(shape, null);
  // The first replayed steps: op by op from the same state too (not donated: the replay reads the same weights),
  // which the replay must equal bit for bit.
  const check = recorded && checked < 3 ? tidy(() => stepOf(false)(inputs)) : null;
  const out = recorded ? recorded.run(inputs) : tidy(() => step(inputs));
  // The weights given: taken back by the run if they were the last run's (lent), else copied in and let go here.
  dispose([inputs.schedule, inputs.batch, inputs.params, inputs.m, inputs.v]);
  state = { params: out.params, m: out.m, v: out.v, step: n + 1 };
  losses.push((await out.loss.data())[0]!);
  out.loss.dispose();
  if (check) {
    const [want, got] = [treeLeaves(check.params), treeLeaves(out.params)];
    for (let i = 0; i < want.length; i++) {
      const [x, y] = [await want[i]!.data(), await got[i]!.data()];
      if (x.some((v, k) => !Object.is(v, y[k])))
        throw new Error(`step ${n}: replayed parameter ${i} differs from op by op`);
    }
    if (!Object.is((await check.loss.data())[0], losses[n])) throw new Error(`step ${n}: replayed loss differs`);
    dispose(check);
    checked++;
  }
  if ((n + 1) % 50 === 0 || n === 0) {
    const recent = losses.slice(-10);
    console.log(
      `step ${n + 1}: loss ${(recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(4)} (mean of the last ` +
        `${recent.length}); ${[...recordings.values()].filter(Boolean).length} recording(s) by batch shape`,
    );
  }
}
const seconds = (performance.now() - t0) / 1000;
console.log(
  `${steps} steps in ${seconds.toFixed(1)} s (${((1000 * seconds) / steps).toFixed(1)} ms a step); loss ` +
    `${losses[0]!.toFixed(4)} -> ${losses.at(-1)!.toFixed(4)}; the first ${checked} replayed steps equal op by op ` +
    'bit for bit',
);
for (const r of recordings.values()) r?.dispose();
dispose([state.params, state.m, state.v]);
gpu.dispose();
