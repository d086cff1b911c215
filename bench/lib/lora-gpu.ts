/**
 * bench:gpu's LoRA tasks (issue 36): a LoRA update step and a LoRA rollout on the GPU, at the Qwen3-0.6B size (or a
 * tiny stand-in under `--quick`), beside PyTorch + peft on the same GPU (bench/torch_gpu.py's `lora_step` and
 * `lora_sample`).
 *
 * The model: the size's transformer (random, `paramsFor`'s seed) with its matrices (embedding and every linear
 * weight) frozen in bf16, as a Hub checkpoint loads with `keepDType` (norm gains stay f32), and LoRA r 16, alpha 32
 * on every linear layer (peft's all-linear: q, k, v, o, gate, up, down; the tied LM head is the embedding), f32
 * adapters. A is drawn as peft draws it; B, which peft starts at zero (the adapted model would then be the base and
 * a check of the adapters would check nothing), is drawn normal with std 0.01 here, on both sides, so the adapters
 * move every adapted output and their gradients reach A and B alike.
 * The weights are drawn once on the host and uploaded as the same bf16 words to the GPU and to a CPU backend of the
 * tasks' own, whose 4 GiB holds the bf16 base (537M matrix entries, 1.07 GB at 0.6B), unlike the f32 weights of
 * the full step.
 *
 * - The step: the SFT loss of the size's random B x T batch (the one the full SFT step trains on), its gradient
 *   with respect to the adapters only, and AdamW on them (lr 1e-4, clip 1), each timed step from the same weights.
 *   Checked before its time counts: the loss and the adapters' gradient norm of a 1 x 16-token batch through the
 *   same weights against the CPU backend (once, before the first round), and the loss and the gradient norm of
 *   every timed step equal, bit for bit, to the first round's.
 * - The rollout: KV-cache sampling with the adapted model, groups of 8 rows over addition prompts (an EOS no row can
 *   sample, so every row runs to its last token), tokens/s. Checked: the log-prob the GPU recorded for every sampled
 *   token of the checked rows, against the CPU backend's full forward over those rows (every row under `--quick`;
 *   at 0.6B the first row of each group, to keep the host's forward to seconds: rows are scored independently).
 */
import {
  adamwInit,
  adamwStep,
  CpuBackend,
  dispose,
  fromHalfBits,
  globalNorm,
  initLora,
  initParams,
  LORA_MODULES,
  randn,
  ReferenceBackend,
  Rng,
  roundToHalf,
  sampleProblems,
  sampleRollouts,
  scoreLogProbs,
  selectRowValues,
  selectRows,
  sftLoss,
  tensor,
  tidy,
  trainableOf,
  treeLeaves,
  treeUnflatten,
  valueAndGrad,
  withLora,
  withTrainable,
  additionTask,
  tokenizerFor,
  type LoraConfig,
  type LoraWeights,
  type PyTree,
  type SequenceBatch,
  type Tensor,
  type TransformerConfig,
  type TransformerParams,
  type WebGpuBackend,
} from '../../src/index.js';
import { check, CheckError, hostReference, type Task, STEPS_A_ROUND, timedSteps } from './gpu-task.js';
import { batchFor, withoutEos, type ModelSize } from './models.js';

/** peft's LoraConfig(r=16, lora_alpha=32, target_modules=all-linear, lora_dropout=0), as the peer sets it. */
export const BENCH_LORA: LoraConfig = { r: 16, alpha: 32, dropout: 0, targetModules: LORA_MODULES, useRslora: false };
/** The std of B's normal init (peft's is zero; see the header). */
const B_STD = 0.01;
/** Rows per prompt in the rollout (as bench:gpu's sampling task). */
const GROUP = 8;

/** The adapted model on both sides: the GPU's and the host's check copy (the same numbers). */
interface Weights {
  readonly gpu: TransformerParams;
  readonly host: TransformerParams;
}

/**
 * One size's LoRA model, shared by its two tasks: made when the first of them is made (before the rounds, as the
 * other tasks make their parameters), on the GPU and on a CPU backend of its own; freed when the last task that
 * uses it is disposed.
 */
class SharedLoraModel {
  private made: Weights | null = null;
  private host: CpuBackend | null = null;
  private users = 0;

  constructor(
    readonly gpu: WebGpuBackend,
    readonly config: TransformerConfig,
  ) {}

  /** The weights, for one more task. */
  use(): Weights {
    this.users++;
    this.made ??= this.make();
    return this.made;
  }

  /**
   * Drawn on the reference backend (host memory, no 4 GiB limit) as `paramsFor` draws (its seed, `initParams`'
   * order), then each tensor uploaded to both sides: a base matrix as its bf16 words, a norm gain and every
   * adapter as f32. The adapters come from a seed of their own: A as `initLora` draws it, B normal (std 0.01).
   */
  private make(): Weights {
    const host = new CpuBackend();
    this.host = host;
    const draw = new ReferenceBackend();
    const copies = <T>(tree: T, half: (t: Tensor) => boolean): [T, T] => {
      const onGpu: Tensor[] = [];
      const onHost: Tensor[] = [];
      for (const t of treeLeaves(tree)) {
        const values = t.dataSync() as Float32Array;
        if (half(t)) {
          const words = roundToHalf('bf16', values);
          onGpu.push(fromHalfBits(words, t.shape, 'bf16', { backend: this.gpu }));
          onHost.push(fromHalfBits(words, t.shape, 'bf16', { backend: host }));
        } else {
          onGpu.push(tensor(values, t.shape, { backend: this.gpu }));
          onHost.push(tensor(values, t.shape, { backend: host }));
        }
        t.dispose();
      }
      return [treeUnflatten(tree, onGpu), treeUnflatten(tree, onHost)];
    };
    const [gpuBase, hostBase] = copies(initParams(this.config, new Rng(0), { backend: draw }), (t) => t.rank === 2);
    const rng = new Rng(1);
    const fresh = initLora(this.config, BENCH_LORA, rng, { backend: draw });
    const drawn: LoraWeights = {
      ...fresh,
      layers: fresh.layers.map((layer) =>
        Object.fromEntries(
          Object.entries(layer).map(([m, pair]) => {
            pair!.b.dispose();
            return [m, { a: pair!.a, b: randn(pair!.b.shape, rng, { std: B_STD, backend: draw }) }];
          }),
        ),
      ),
    };
    const [gpuLora, hostLora] = copies(drawn, () => false);
    return { gpu: withLora(gpuBase, gpuLora), host: withLora(hostBase, hostLora) };
  }

  /** A task is done with the model: the last one frees both copies and the host backend. */
  release(): void {
    if (--this.users > 0) return;
    if (this.made) dispose([this.made.gpu, this.made.host]);
    this.made = null;
    this.host?.dispose();
    this.host = null;
  }
}

/** The rollout's shape: rows (a multiple of 8), new tokens per row, and which rows the host scores. */
export interface LoraRollout {
  readonly rows: number;
  readonly newTokens: number;
  /** Rows scored again on the host (`all`, or the first of each group of 8). */
  readonly checkRows: 'all' | 'group-firsts';
}

/** The two LoRA tasks of one size, made on demand (bench:gpu makes only the kinds `--tasks` asks for). */
export function loraTasks(
  gpu: WebGpuBackend,
  size: ModelSize,
  label: string,
  rollout: LoraRollout,
): { step: () => Task; rollout: () => Task } {
  const tokenizer = withoutEos(tokenizerFor(additionTask()));
  // The longest addition prompt is 16 tokens (bench:gpu's sampling task sizes its model so).
  const config: TransformerConfig = {
    ...size.config,
    vocabSize: Math.max(size.config.vocabSize, tokenizer.vocabSize),
    maxSeqLen: Math.max(size.config.maxSeqLen, 16 + rollout.newTokens),
  };
  const model = new SharedLoraModel(gpu, config);
  return {
    step: () => loraStepTask(model, { ...size, config }, label),
    rollout: () => loraRolloutTask(model, tokenizer, label, rollout),
  };
}

const loraLabel = (c: TransformerConfig): string =>
  `bf16 base d${c.dModel} L${c.nLayers} V${c.vocabSize}, LoRA r${BENCH_LORA.r} alpha ${BENCH_LORA.alpha} all-linear`;

function loraStepTask(model: SharedLoraModel, size: ModelSize, label: string): Task {
  const { gpu, config: c } = model;
  const w = model.use();
  const batch: SequenceBatch = batchFor(size);
  const seq = batch.promptLen + batch.completionLen;
  const name = `LoRA SFT step ${label}: ${loraLabel(c)}, B${batch.batchSize}xT${seq}`;
  const checkLen = Math.min(16, size.seqLen);
  const checkBatch = batchFor({ ...size, seqLen: checkLen }, 1);
  /** The SFT loss of `b` and its gradient with respect to the adapters only (the base gets none). */
  const lossAndGrads = (params: TransformerParams, b: SequenceBatch): [Tensor, PyTree] =>
    valueAndGrad((t: PyTree) => sftLoss(withTrainable(params, t), c, b))(trainableOf(params));
  let opt: ReturnType<typeof adamwInit<PyTree>> | null = null;
  let first: { loss: number; norm: number } | null = null;
  /** How far the GPU's check values were from the host's (relative), for the table. */
  let margins = '';
  /** One step from the shared weights (every step starts from them, so each one's loss and norm are checkable). */
  const step = async (
    params: TransformerParams,
  ): Promise<{ loss: number; norm: number; encoded: ReturnType<WebGpuBackend['stats']> }> => {
    opt ??= adamwInit(trainableOf(params));
    const state = opt;
    const out = tidy(() => {
      const [loss, grads] = lossAndGrads(params, batch);
      const stepped = adamwStep(trainableOf(params), grads, state, { lr: 1e-4, maxGradNorm: 1 });
      return { loss, gradNorm: stepped.gradNorm, params: stepped.params, state: stepped.state };
    });
    const encoded = gpu.stats();
    const [loss, norm] = await Promise.all([out.loss.data(), out.gradNorm.data()]);
    dispose(out);
    return { loss: loss[0]!, norm: norm[0]!, encoded };
  };
  /** The loss and the adapters' gradient norm of the 1 x 16-token batch. */
  const small = async (params: TransformerParams): Promise<[number, number]> => {
    const out = tidy(() => {
      const [loss, grads] = lossAndGrads(params, checkBatch);
      return { loss, norm: globalNorm(grads) };
    });
    const values = [(await out.loss.data())[0]!, (await out.norm.data())[0]!] as [number, number];
    dispose(out);
    return values;
  };
  const task: Task = {
    name,
    unit: 'ms/step',
    figure: (ms) => ms,
    get checked() {
      return (
        `loss and adapter gradient norm of a 1 x ${checkLen}-token batch vs the CPU backend (B drawn nonzero${margins}); ` +
        'loss and gradient norm equal across rounds'
      );
    },
    counters: '',
    run: async () => {
      if (first === null) {
        const want = await hostReference(name, () => small(w.host));
        const got = await small(w.gpu);
        // The loss tolerance of runtime-steady.spec.ts (GPU vs CPU over a whole step), for the norm too.
        check(name, `loss (1 x ${checkLen} tokens)`, [got[0]], [want[0]], 0, 1e-4);
        check(name, `adapter gradient norm (1 x ${checkLen} tokens)`, [got[1]], [want[1]], 0, 1e-4);
        const rel = (i: number) => (Math.abs(got[i]! - want[i]!) / Math.abs(want[i]!)).toExponential(1);
        margins = `; relative differences ${rel(0)} and ${rel(1)}`;
      }
      const { ms, results, counters } = await timedSteps(gpu, () => step(w.gpu));
      for (const { loss, norm } of results) {
        if (!(Number.isFinite(loss) && Number.isFinite(norm)))
          throw new CheckError(`${name}: the loss is ${loss}, the gradient norm ${norm}`);
        if (first === null) first = { loss, norm };
        else {
          check(name, 'loss (against round 1)', [loss], [first.loss], 0, 0);
          check(name, 'gradient norm (against round 1)', [norm], [first.norm], 0, 0);
        }
      }
      task.counters = counters;
      return ms;
    },
    peer: {
      task: 'lora_step',
      row: [c.vocabSize, c.dModel, c.nLayers, c.nHeads, c.dFf, batch.batchSize, seq],
      r: BENCH_LORA.r,
      alpha: BENCH_LORA.alpha,
      bStd: B_STD,
      steps: STEPS_A_ROUND,
    },
    dispose: () => {
      if (opt) dispose(opt);
      opt = null;
      model.release();
    },
  };
  return task;
}

function loraRolloutTask(
  model: SharedLoraModel,
  tokenizer: ReturnType<typeof withoutEos>,
  label: string,
  shape: LoraRollout,
): Task {
  const { gpu, config: c } = model;
  const w = model.use();
  const prompts = sampleProblems(additionTask(), Math.max(1, shape.rows / GROUP), new Rng(2)).map((p) => p.prompt);
  const rows = prompts.length * GROUP;
  const checked =
    shape.checkRows === 'all'
      ? Array.from({ length: rows }, (_, r) => r)
      : Array.from({ length: prompts.length }, (_, g) => g * GROUP);
  const name = `LoRA KV-cache sampling ${label}: ${loraLabel(c)}, ${rows} rows x ${shape.newTokens} new`;
  const opts = { groupSize: GROUP, maxNewTokens: shape.newTokens, temperature: 1 };
  let warm = false;
  /** The largest difference seen between the GPU's recorded log-probs and the host's, for the table. */
  let worst = 0;
  const task: Task = {
    name,
    unit: 'tokens/s',
    figure: (ms) => (rows * shape.newTokens) / (ms / 1000),
    get checked() {
      const what =
        shape.checkRows === 'all'
          ? "every sampled token's log-prob"
          : `the sampled log-probs of ${checked.length} rows (the first of each group of ${GROUP})`;
      return `${what} vs the CPU backend's scoring (largest difference ${worst.toExponential(1)} nats)`;
    },
    counters: '',
    run: async (round) => {
      if (!warm) {
        await sampleRollouts(w.gpu, c, tokenizer, prompts, new Rng(9), { ...opts, maxNewTokens: 4 });
        warm = true;
      }
      const before = gpu.stats();
      const t0 = performance.now();
      const ro = await sampleRollouts(w.gpu, c, tokenizer, prompts, new Rng(3 + round), opts);
      const ms = performance.now() - t0;
      const after = gpu.stats();
      if (ro.completionLen !== shape.newTokens)
        throw new CheckError(`${name}: ${ro.completionLen} tokens, want ${shape.newTokens}`);
      const want = await hostReference(name, async () => {
        const lp = tidy(() => scoreLogProbs(w.host, c, selectRows(ro, checked)));
        const out = await lp.data();
        lp.dispose();
        return out;
      });
      // The recorded log-probs are the decode's (KV cache, f32 activations) and the host's a full forward over the
      // same bf16 words: 1e-3 nats apart at most, while a wrong or dropped kernel changes which tokens are likely.
      const got = selectRowValues(ro.sampledLogProbs, ro.completionLen, checked);
      check(name, 'log-prob', got, want, 1e-3, 0);
      for (let i = 0; i < got.length; i++) worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
      task.counters = `${((after.readBacks - before.readBacks) / shape.newTokens).toFixed(2)} read-backs per token`;
      return ms;
    },
    peer: {
      task: 'lora_sample',
      row: [c.vocabSize, c.dModel, c.nLayers, c.nHeads, c.dFf],
      rows,
      prompt: 8,
      new: shape.newTokens,
      r: BENCH_LORA.r,
      alpha: BENCH_LORA.alpha,
      bStd: B_STD,
    },
    dispose: () => model.release(),
  };
  return task;
}
