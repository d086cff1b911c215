/**
 * The model sizes of issue 10's table, the same for our side and PyTorch's (bench/torch_model.py: plain multi-head
 * attention, RMSNorm eps 1e-6, SwiGLU, tied head), plus the trainer's default model.
 * An SFT step is forward + backward + AdamW on a [B, T] batch of random tokens whose second half is the target,
 * as the PyTorch reference does (it scores T - 1 positions; our `sftLoss` runs the LM head on the target half).
 */
import { dispose, Rng, tidy, valueAndGrad, type Backend, type Tensor } from '../../src/index.js';
import {
  adamwInit,
  adamwStep,
  initParams,
  smallConfig,
  type TransformerConfig,
  type TransformerParams,
} from '../../src/nn/index.js';
import type { SequenceBatch } from '../../src/rl/index.js';
import { sftBatch, sftExamples, sftLoss } from '../../src/rl/index.js';
import { TRAIN_DEFAULTS } from '../../src/training/index.js';
import { additionTask, sampleProblems, tokenizerFor, type Tokenizer } from '../../src/tasks/index.js';

export interface ModelSize {
  /** The name used on the command line (`--sizes default,small`). */
  readonly name: string;
  /** The row name of torch_reference_step.py, so the two outputs can be put side by side. */
  readonly torchRow: string;
  readonly config: TransformerConfig;
  readonly batch: number;
  readonly seqLen: number;
  /** Practical on a CPU rasterizer (llvmpipe), where it runs by default (d256 L4 B32 x T128 takes minutes a step). */
  readonly small: boolean;
}

const mha = (vocabSize: number, dModel: number, nLayers: number, nHeads: number, dFf: number, maxSeqLen: number) =>
  smallConfig(vocabSize, { dModel, nLayers, nHeads, nKvHeads: nHeads, dFf, maxSeqLen, rmsEps: 1e-6 });

/** The trainer's default model: `TRAIN_DEFAULTS.model` over the addition task's vocabulary. */
export const defaultConfig = (): TransformerConfig =>
  smallConfig(tokenizerFor(additionTask()).vocabSize, { ...TRAIN_DEFAULTS.model });

export const MODEL_SIZES: readonly ModelSize[] = [
  {
    name: 'default',
    torchRow: '(none: the trainer default)',
    config: defaultConfig(),
    batch: TRAIN_DEFAULTS.warmStartBatchSize,
    seqLen: 0, // the worked solutions' padded length
    small: true,
  },
  {
    name: 'small',
    torchRow: 'small d256 L4 T128 B32',
    config: mha(256, 256, 4, 8, 768, 128),
    batch: 32,
    seqLen: 128,
    small: false,
  },
  {
    name: 'medium',
    torchRow: 'medium d512 L8 T256 B16',
    config: mha(1024, 512, 8, 8, 1536, 256),
    batch: 16,
    seqLen: 256,
    small: false,
  },
  {
    name: 'large',
    torchRow: 'large d1024 L8 T256 B16',
    config: mha(4096, 1024, 8, 16, 2816, 256),
    batch: 16,
    seqLen: 256,
    small: false,
  },
  {
    name: '0.6b',
    torchRow: '0.6B-like d1024 L28 V151936 T256 B4',
    config: mha(151936, 1024, 28, 16, 3072, 256),
    batch: 4,
    seqLen: 256,
    small: false,
  },
];

/**
 * The sizes to run: `--sizes a,b` or RLVR_BENCH_SIZES, else `all` / `--all`, else the small ones on a CPU
 * rasterizer and every size on a GPU. `--batch N` overrides every size's batch (dispatch counts do not depend
 * on it, so a small batch counts them cheaply on llvmpipe).
 */
export function selectSizes(spec: string | undefined, cpuLike: boolean): ModelSize[] {
  if (spec === undefined || spec === '') return MODEL_SIZES.filter((s) => s.small || !cpuLike);
  if (spec === 'all') return [...MODEL_SIZES];
  const names = spec.split(',').map((s) => s.trim());
  const unknown = names.filter((n) => !MODEL_SIZES.some((s) => s.name === n));
  if (unknown.length > 0) {
    throw new Error(
      `unknown model size ${unknown.join(', ')}; choose from ${MODEL_SIZES.map((s) => s.name).join(', ')}, all`,
    );
  }
  return MODEL_SIZES.filter((s) => names.includes(s.name));
}

/** A [B, T] batch of random tokens (ids 3..V-1), the first half prompt, the second half the scored target. */
export function randomSftBatch(vocabSize: number, batch: number, seqLen: number, seed: number): SequenceBatch {
  const rng = new Rng(seed);
  const tokens = new Int32Array(batch * seqLen);
  for (let i = 0; i < tokens.length; i++) tokens[i] = 3 + Math.floor(rng.uniform() * (vocabSize - 3));
  const promptLen = Math.floor(seqLen / 2);
  const completionLen = seqLen - promptLen;
  return {
    batchSize: batch,
    promptLen,
    completionLen,
    tokens,
    attentionMask: new Uint8Array(batch * seqLen).fill(1),
    completionMask: new Float32Array(batch * completionLen).fill(1),
  };
}

/**
 * The batch a size trains on: for `default`, the trainer's warm-start batch (worked addition solutions, fixed
 * seed); otherwise random tokens. `batch` overrides the row count.
 */
export function batchFor(size: ModelSize, batch = size.batch): SequenceBatch {
  if (size.name !== 'default') return randomSftBatch(size.config.vocabSize, batch, size.seqLen, 1);
  const task = additionTask();
  return sftBatch(tokenizerFor(task), sftExamples(task, sampleProblems(task, batch, new Rng(1))));
}

export const paramsFor = (config: TransformerConfig, backend: Backend): ReturnType<typeof initParams> =>
  initParams(config, new Rng(0), { backend });

export type { Tensor };

/** A tokenizer whose EOS id no row can sample (out of range): generation always runs to maxNewTokens. */
export const withoutEos = (base: Tokenizer): Tokenizer => ({
  vocabSize: base.vocabSize,
  bos: base.bos,
  pad: base.pad,
  eos: -1,
  stopIds: [],
  promptIds: (prompt) => base.promptIds(prompt),
  encode: (text) => base.encode(text),
  decode: (ids, opts) =>
    base.decode(
      ids.filter((id) => id < base.vocabSize),
      opts,
    ),
});

/**
 * An SFT stepper on a backend: each call runs one step (valueAndGrad of sftLoss, AdamW with clipping at 1) from the
 * state the last one left and returns its loss, read synchronously (the CPU backends).
 */
export function sftStepper(backend: Backend, config: TransformerConfig, batch: SequenceBatch): () => number {
  let params: TransformerParams = initParams(config, new Rng(0), { backend });
  let opt = adamwInit(params);
  return () => {
    const next = tidy(() => {
      const [loss, grads] = valueAndGrad((p: TransformerParams) => sftLoss(p, config, batch))(params);
      const s = adamwStep(params, grads, opt, { lr: 1e-4, maxGradNorm: 1 });
      return { params: s.params, opt: s.state, loss };
    });
    dispose([params, opt]);
    params = next.params;
    opt = next.opt;
    const loss = next.loss.dataSync()[0]!;
    next.loss.dispose();
    return loss;
  };
}
