/**
 * Why adapter-only training of a new model plateaus: the main job's supervised warm-start (2+1-digit addition,
 * batches of 64 worked solutions, AdamW at 3e-3 with 20 warmup steps and cosine decay to a tenth, gradient norm
 * clipped at 1) for a fixed number of steps from the same seed's random model, training different parts, one thing
 * changed at a time against LoRA at full rank (r 64 = d_model on every linear layer, alpha 64, scaling 1):
 *
 *   full                 every weight (the reference)
 *   lora                 adapters only, on the random frozen base
 *   lora+final-norm      ... and the final RMSNorm's gain
 *   lora+embed           ... and the (tied) embedding, which is the LM head
 *   lora+norms           ... and every RMSNorm gain
 *   lora lr x10          adapters only at 3e-2
 *   lora scaling x4      adapters only, alpha 256
 *   lora, embed std 0.2  adapters only on a base drawn with initializer_range 0.2 instead of 0.02
 *
 * Per variant: the SFT loss (mean of 10 steps) at steps 50, 200 and the last; greedy pass@1 on 200 training-split
 * problems; and the largest |logit| over a batch against its bound for a frozen head: with tied embeddings E and the
 * final RMSNorm's gain g, a logit is E_v . (g * x / rms(x)) <= max_v |E_v| * max|g| * sqrt(d_model).
 *
 *   npm run example:lora-plateau [-- --steps 600 --seed 0 --threads 1 --variants full,lora,...]
 */
import { parseArgs } from 'node:util';
import { createStages } from '../src/cli/progress.js';
import {
  adamwInit,
  adamwStep,
  contextWarmStartBatch,
  CpuBackend,
  forward,
  initLora,
  initParams,
  LORA_MODULES,
  lrAt,
  noGrad,
  Rng,
  sampleProblems,
  sampleRollouts,
  setDefaultBackend,
  sftLoss,
  smallConfig,
  tensor,
  tidy,
  TRAIN_DEFAULTS,
  taskFor,
  tokenizerFor,
  treeLeaves,
  validateConfig,
  valueAndGrad,
  type PyTree,
  type Tensor,
  type TransformerParams,
} from '../src/index.js';

const VARIANTS = [
  'full',
  'lora',
  'lora+final-norm',
  'lora+embed',
  'lora+norms',
  'lora-lr-x10',
  'lora-scaling-x4',
  'lora-embed-std-0.2',
] as const;
type Variant = (typeof VARIANTS)[number];

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '600' },
    seed: { type: 'string', default: '0' },
    threads: { type: 'string', default: '1' },
    variants: { type: 'string', default: VARIANTS.join(',') },
  },
});
const steps = Number(values.steps);
const seed = Number(values.seed);
const backend = new CpuBackend({ threads: Number(values.threads) });
setDefaultBackend(backend);

const cfg = TRAIN_DEFAULTS;
const task = taskFor(cfg);
const tokenizer = tokenizerFor(task);
const config = validateConfig(smallConfig(tokenizer.vocabSize, { ...cfg.model }));

/** The trained part of a variant, and the policy it makes with the frozen rest. */
interface Parts {
  readonly trainable: PyTree;
  readonly policy: (t: PyTree) => TransformerParams;
  readonly lr: number;
}

function partsOf(variant: Variant, base: TransformerParams, rng: Rng): Parts {
  const lr = cfg.warmStartLearningRate * (variant === 'lora-lr-x10' ? 10 : 1);
  if (variant === 'full') return { trainable: base as unknown as PyTree, policy: (t) => t as never, lr };
  const alpha = variant === 'lora-scaling-x4' ? 256 : 64;
  const lora = initLora(
    config,
    { r: config.dModel, alpha, dropout: 0, targetModules: [...LORA_MODULES], useRslora: false },
    rng,
    { backend },
  );
  const extra: Record<string, PyTree> = {};
  if (variant === 'lora+final-norm') extra.finalNorm = base.finalNorm;
  if (variant === 'lora+embed') extra.embed = base.embed.weight;
  if (variant === 'lora+norms') {
    extra.finalNorm = base.finalNorm;
    extra.norms = base.layers.map((l) => [l.attnNorm, l.mlpNorm]) as PyTree;
  }
  const trainable = { adapters: lora.layers as PyTree, ...extra } as PyTree;
  const policy = (t: PyTree): TransformerParams => {
    const p = t as Record<string, PyTree>;
    const norms = p.norms as [Tensor, Tensor][] | undefined;
    return {
      ...base,
      ...(p.embed ? { embed: { weight: p.embed as Tensor } } : {}),
      ...(p.finalNorm ? { finalNorm: p.finalNorm as Tensor } : {}),
      layers: norms
        ? base.layers.map((l, i) => ({ ...l, attnNorm: norms[i]![0], mlpNorm: norms[i]![1] }))
        : base.layers,
      lora: { ...lora, layers: p.adapters as never },
    };
  };
  return { trainable, policy, lr };
}

async function greedyPassAt1(params: TransformerParams): Promise<number> {
  const problems = sampleProblems(task, 200, new Rng(7919));
  const out = await sampleRollouts(
    params,
    config,
    tokenizer,
    problems.map((p) => p.prompt),
    new Rng(0),
    {
      maxNewTokens: cfg.maxCompletionLength,
      temperature: 0,
    },
  );
  return out.completions.filter((c, i) => task.verify(c, problems[i]!) > 0).length / problems.length;
}

/** The largest |logit| over a batch's positions, and its bound for the frozen head (see the header). */
async function logitRange(params: TransformerParams, tokens: Tensor): Promise<{ max: number; bound: number }> {
  const logits = noGrad(() => forward(params, config, tokens));
  const data = await logits.data();
  logits.dispose();
  let max = 0;
  for (const x of data) max = Math.max(max, Math.abs(x));
  const e = await params.embed.weight.data();
  let rowMax = 0;
  for (let v = 0; v < config.vocabSize; v++) {
    let s = 0;
    for (let j = 0; j < config.dModel; j++) s += e[v * config.dModel + j]! ** 2;
    rowMax = Math.max(rowMax, Math.sqrt(s));
  }
  const g = await params.finalNorm.data();
  const gMax = Math.max(...Array.from(g, Math.abs));
  return { max, bound: rowMax * gMax * Math.sqrt(config.dModel) };
}

async function run(variant: Variant): Promise<string> {
  const t0 = performance.now();
  const rng = new Rng(seed);
  const base = initParams(config, rng, { backend, std: variant === 'lora-embed-std-0.2' ? 0.2 : 0.02 });
  const parts = partsOf(variant, base, new Rng(seed + 4241));
  let trainable = parts.trainable;
  let opt = adamwInit(trainable);
  const losses: number[] = [];
  let lastBatch = null as ReturnType<typeof contextWarmStartBatch> | null;
  for (let step = 0; step < steps; step++) {
    const problems = sampleProblems(task, cfg.warmStartBatchSize, rng);
    const batch = contextWarmStartBatch(task, problems, tokenizer, config, rng, {
      share: 0,
      groupSize: cfg.numGenerations,
      bicc: { contextShare: cfg.biccContextShare, placement: cfg.biccPlacement },
    });
    lastBatch = batch;
    const lr = lrAt({ peakLr: parts.lr, warmupSteps: 20, totalSteps: steps, minLr: parts.lr / 10 }, opt.step);
    const next = tidy(() => {
      const [loss, grads] = valueAndGrad((t: PyTree) => sftLoss(parts.policy(t), config, batch))(trainable);
      const stepped = adamwStep(trainable, grads, opt, { lr, maxGradNorm: cfg.maxGradNorm, weightDecay: 0 });
      return { loss, params: stepped.params, state: stepped.state };
    });
    losses.push((await next.loss.data())[0]!);
    next.loss.dispose();
    for (const t of treeLeaves([trainable, opt.m, opt.v])) t.dispose();
    trainable = next.params;
    opt = next.state;
  }
  const policy = parts.policy(trainable);
  const mean = (a: number, b: number): number => losses.slice(a, b).reduce((s, x) => s + x, 0) / (b - a);
  const at = (s: number): string => (s <= steps ? mean(Math.max(0, s - 10), s).toFixed(2) : '-');
  const passAt1 = await greedyPassAt1(policy);
  const tokens = tensor(lastBatch!.tokens, [lastBatch!.batchSize, lastBatch!.promptLen + lastBatch!.completionLen], {
    dtype: 'i32',
    backend,
  });
  const range = await logitRange(policy, tokens);
  tokens.dispose();
  const seconds = ((performance.now() - t0) / 1000).toFixed(0);
  return (
    `| ${variant} | ${at(50)} | ${at(200)} | ${at(steps)} | ${passAt1.toFixed(3)} | ${range.max.toFixed(2)} | ` +
    `${range.bound.toFixed(2)} | ${seconds} |`
  );
}

console.log(
  `seed ${seed}, ${steps} supervised steps of ${cfg.warmStartBatchSize} (d_model ${config.dModel}, vocabulary ${config.vocabSize})`,
);
const asked = values.variants.split(',') as Variant[];
for (const v of asked)
  if (!VARIANTS.includes(v)) throw new Error(`unknown variant ${v}: one of ${VARIANTS.join(', ')}`);
// A variant runs for minutes: a line when each starts and ends, and every 30 s between; the table at the end.
const stages = createStages(asked.length);
const rows: string[] = [];
for (const v of asked) {
  stages.start(`${v}: ${steps} steps`);
  rows.push(await run(v));
  stages.done();
}
stages.stop();
console.log(
  '\n| variant | loss @50 | loss @200 | loss @last | greedy pass@1 | max abs logit | frozen-head bound | s |',
);
console.log('|---|---|---|---|---|---|---|---|');
for (const row of rows) console.log(row);
backend.dispose();
