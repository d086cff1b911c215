/**
 * What a run trains, as one seam: every weight (`FULL`) or LoRA adapters on a frozen base (`loraTraining`, peft's
 * `LoraLayer` kind as one value). Each value says how a phase's policy is made from the weights it starts from
 * (`attach`), what the KL reference is when RL begins or resumes (`reference`), how a checkpoint is written
 * (`save`) and read back (`loadRunCheckpoint`, with its mismatch checks), and what the run leaves in OUTPUT at the
 * end (`outputs`). `planRun` states which phase trains what; the trainer asks the plan and branches on nothing.
 * A second adapter kind would be one more value.
 */
import * as E from 'fp-ts/lib/Either.js';
import type { Backend } from '../core/backend.js';
import { escapeControls } from '../core/errors.js';
import type { PyTree } from '../core/pytree.js';
import { Rng, type RngState } from '../core/rng.js';
import { dispose } from '../core/scope.js';
import { stopGradient } from '../core/transforms.js';
import { writePlainDirAtomic } from '../io/atomic-dir.js';
import { loadCheckpoint, saveCheckpoint, type Checkpoint, type Json } from '../io/checkpoint.js';
import { readAdapterConfig, readAdapterTensors, writeAdapterFiles } from '../io/adapter-files.js';
import {
  initLora,
  LORA_MODULES,
  loraScaling,
  mergeLora,
  withLora,
  withoutLora,
  type LoraConfig,
  type LoraLayer,
} from '../nn/lora.js';
import { isLoraCheckpoint, loadLoraCheckpoint, saveLoraCheckpoint } from '../io/lora-checkpoint.js';
import type { OptimizerState } from '../nn/optim.js';
import type { TransformerConfig, TransformerParams } from '../nn/transformer.js';
import { dirname, join, resolve } from '../platform/files.js';
import type { TrainConfig } from './config.js';
import { savePretrained, type PretrainedParts } from './pretrained.js';
import { resumesInPlace } from './output-dir.js';
import { ResumeMismatchError } from './resume-check.js';

/** The run as a phase's training sees it. */
export interface RunParts {
  readonly cfg: TrainConfig;
  readonly config: TransformerConfig;
}

/** What a checkpoint holds besides the config: the policy, the optimizer's state, the RNGs, the trainer's state. */
export interface RunState {
  readonly params: TransformerParams;
  readonly opt: OptimizerState<PyTree>;
  readonly rngs: Readonly<Record<string, RngState>>;
  readonly trainerState: Json;
}

export interface Trains {
  /** What the phase trains, for messages and mismatch errors: 'full fine-tuning' or 'LoRA adapters'. */
  readonly name: 'full fine-tuning' | 'LoRA adapters';
  /** The adapters' config under LoRA, else null (what the memory estimate counts). */
  readonly lora: LoraConfig | null;
  /** Whether a Hub model's weights stay in their stored dtype (bf16/f16, widened in the kernels): frozen ones do. */
  readonly keepsStoredDType: boolean;
  /** The phase's policy from the weights it starts from: adapters attached (new or `--adapter`'s), or as they are. */
  attach(params: TransformerParams, run: RunParts, backend: Backend): Promise<TransformerParams>;
  /**
   * The frozen KL reference when RL begins (`resumedFrom` null) or resumes from a checkpoint directory, and what is
   * saved beside the run's checkpoints for it: null when the run needs none.
   */
  reference(
    run: RunParts & { readonly params: TransformerParams; readonly needsReference: boolean },
    backend: Backend,
    resumedFrom: string | null,
  ): Promise<TransformerParams | null>;
  save(dir: string, run: RunParts, state: RunState): Promise<void>;
  /**
   * What the run leaves in OUTPUT at the end; `warn` hears of companion files left out of a Hub model, and of
   * weights past bf16's range written as its largest value.
   */
  outputs(
    run: RunParts & { readonly params: TransformerParams },
    pretrained: PretrainedParts | null,
    out: string,
    warn: (warning: OutputWarning) => void,
  ): Promise<void>;
}

/** What writing OUTPUT warns about (`TrainWarning`'s `skipped-companions` and `saturated-bf16`). */
export type OutputWarning =
  | { readonly kind: 'skipped-companions'; readonly message: string; readonly files: readonly string[] }
  | { readonly kind: 'saturated-bf16'; readonly message: string; readonly tensors: readonly string[] };

/** What each phase trains. */
export interface TrainingPlan {
  readonly warmStart: Trains;
  readonly rl: Trains;
}

export const trainsAt = (plan: TrainingPlan, phase: 'warmstart' | 'rl'): Trains =>
  phase === 'warmstart' ? plan.warmStart : plan.rl;

/** What the memory estimate counts for each distinct phase: its adapters, or null for every weight. */
export const phaseShapes = (plan: TrainingPlan): (LoraConfig | null)[] =>
  plan.warmStart === plan.rl ? [plan.rl.lora] : [plan.warmStart.lora, plan.rl.lora];

/**
 * The rule. Without LoRA every phase trains every weight. With LoRA on a Hub model (`--model`) every phase trains
 * adapters on its frozen weights, as peft users expect. With LoRA on a new model the supervised warm-start trains
 * every weight (a new model's base is what the warm-start makes: adapters on a random frozen base cannot learn the
 * task, docs/results/lora/README.md), then RL trains adapters on that base, which is also the KL reference.
 */
export function planRun(cfg: TrainConfig, lora: Trains | null): TrainingPlan {
  if (!lora) return { warmStart: FULL, rl: FULL };
  return { warmStart: cfg.modelDir === null ? FULL : lora, rl: lora };
}

/**
 * The plan a config states, with `--adapter`'s `adapter_config.json` read (once: the adapter's tensors are read
 * when RL's or the warm-start's policy is made).
 */
export async function readPlan(cfg: TrainConfig): Promise<TrainingPlan> {
  if (cfg.adapter === null) return planRun(cfg, cfg.lora ? loraTraining(cfg.lora, null) : null);
  const read = await readAdapterConfig(cfg.adapter);
  if (E.isLeft(read)) throw read.left;
  return planRun(cfg, loraTraining(read.right, cfg.adapter));
}

/** Every weight: the reference is a copy saved beside the checkpoints (`OUTPUT/reference`). */
export const FULL: Trains = {
  name: 'full fine-tuning',
  lora: null,
  keepsStoredDType: false,
  attach: async (params) => params,
  async reference(run, backend, resumedFrom) {
    const out = run.cfg.outputDir ? join(run.cfg.outputDir, 'reference') : null;
    if (resumedFrom === null) {
      // Tensors are immutable, so the reference is new handles over the same storage (no copy).
      if (out) await saveWeights(out, run.config, run.params);
      return run.needsReference ? stopGradient(run.params) : null;
    }
    if (!run.needsReference) return null;
    const from = join(dirname(resumedFrom), 'reference');
    const res = await loadCheckpoint(from, { backend })();
    if (E.isLeft(res)) throw res.left;
    // A resumed run writing elsewhere keeps its reference beside its own checkpoints, so it can be resumed too.
    if (out && resolve(out) !== resolve(from)) await saveWeights(out, run.config, res.right.params);
    return res.right.params;
  },
  async save(dir, run, s) {
    const res = await saveCheckpoint(dir, {
      config: run.config,
      params: s.params,
      optimizer: s.opt as OptimizerState<TransformerParams>,
      rngs: s.rngs,
      trainerState: s.trainerState,
    })();
    if (E.isLeft(res)) throw res.left;
  },
  async outputs(run, pretrained, out, warn) {
    if (pretrained) await saveHubModel(run.params, pretrained, out, run.cfg.saveDtype, warn);
  },
};

/** The adapters' generator: their own, so attaching them shifts no other stream (and a resume draws the same). */
const adapterRng = (seed: number): Rng => new Rng(seed + 4241);

/**
 * LoRA adapters (`config`; from `adapterDir` when continuing a saved adapter, else new: A drawn from the seed's
 * adapter generator, B zero). The reference is the base with the adapters off, as TRL does with peft: no second copy
 * of the weights. A new model's base, which no directory holds, is saved as `OUTPUT/base` when RL begins and inside
 * each checkpoint.
 */
export function loraTraining(config: LoraConfig, adapterDir: string | null): Trains {
  return {
    name: 'LoRA adapters',
    lora: config,
    keepsStoredDType: true,
    async attach(params, run, backend) {
      if (params.lora) return params;
      if (adapterDir === null)
        return withLora(params, initLora(run.config, config, adapterRng(run.cfg.seed), { backend }));
      const allowNonFinite = run.cfg.allowNonFiniteWeights;
      const read = await readAdapterTensors(adapterDir, config, run.config, backend, { allowNonFinite });
      if (E.isLeft(read)) throw read.left;
      return withLora(params, read.right);
    },
    async reference(run, _backend, resumedFrom) {
      const out = run.cfg.outputDir ? join(run.cfg.outputDir, 'base') : null;
      const base = withoutLora(run.params);
      const ownBase = run.cfg.modelDir === null;
      if (ownBase && out && !resumesInPlace(run.cfg.outputDir!, resumedFrom)) await saveWeights(out, run.config, base);
      return run.needsReference ? stopGradient(base) : null;
    },
    async save(dir, run, s) {
      const ck = { config: run.config, lora: config, params: s.params, rngs: s.rngs, trainerState: s.trainerState };
      const optimizer = s.opt as OptimizerState<readonly LoraLayer[]>;
      const where = { withBase: run.cfg.modelDir === null, baseModel: run.cfg.modelDir };
      const res = await saveLoraCheckpoint(dir, { ...ck, optimizer }, where)();
      if (E.isLeft(res)) throw res.left;
    },
    async outputs(run, pretrained, out, warn) {
      const baseModel = run.cfg.modelDir ?? (run.cfg.outputDir ? join(run.cfg.outputDir, 'base') : null);
      await writePlainDirAtomic(join(out, 'adapter'), (tmp) =>
        writeAdapterFiles(tmp, run.params.lora!, config, baseModel),
      );
      if (!pretrained || !run.cfg.mergeLora) return;
      const merged = mergeLora(run.params);
      try {
        await saveHubModel(merged, pretrained, out, run.cfg.saveDtype, warn);
      } finally {
        dispose(merged);
      }
    },
  };
}

/** A checkpoint as loaded, of either kind (its optimizer over what it trained); the caller checks its trainer state. */
export type LoadedCheckpoint = Omit<Checkpoint, 'optimizer'> & { readonly optimizer?: OptimizerState<PyTree> };

/**
 * A checkpoint of either kind, checked against the plan: a LoRA checkpoint needs a plan with LoRA and the same
 * adapters (rank, alpha, targets, ...). The trainer then calls `checkPhase` once it knows the checkpoint's phase.
 */
export async function loadRunCheckpoint(
  dir: string,
  backend: Backend,
  plan: TrainingPlan,
  cfg: TrainConfig,
  loadBase: (() => Promise<TransformerParams>) | null,
): Promise<LoadedCheckpoint> {
  const allowNonFinite = cfg.allowNonFiniteWeights;
  const lora = plan.rl.lora;
  if (!(await isLoraCheckpoint(dir))) {
    const res = await loadCheckpoint(dir, { backend, allowNonFinite })();
    if (E.isLeft(res)) throw res.left;
    return res.right as LoadedCheckpoint;
  }
  if (!lora) throw new ResumeMismatchError('lora', 'LoRA adapters', 'full fine-tuning');
  const base = loadBase ? await loadBase() : undefined;
  const res = await loadLoraCheckpoint(dir, { backend, allowNonFinite, ...(base ? { base } : {}) })();
  if (E.isLeft(res)) {
    if (base) dispose(base);
    throw res.left;
  }
  const ck = res.right;
  for (const key of Object.keys(lora) as (keyof LoraConfig)[]) {
    if (JSON.stringify(ck.lora[key]) !== JSON.stringify(lora[key])) {
      dispose([ck.params, ck.optimizer]);
      throw new ResumeMismatchError(`lora.${key}`, ck.lora[key], lora[key]);
    }
  }
  return ck as LoadedCheckpoint;
}

/**
 * Whether a loaded checkpoint at `phase`, step `step`, is what the plan trains there; null if so. One exception:
 * a full checkpoint at RL step 0 starts LoRA RL (adapters attach to it), as one warm-start serves several methods.
 */
export function phaseMismatch(
  plan: TrainingPlan,
  params: TransformerParams,
  phase: 'warmstart' | 'rl',
  step: number,
): ResumeMismatchError | null {
  const held: Trains['name'] = params.lora ? 'LoRA adapters' : 'full fine-tuning';
  const wanted = trainsAt(plan, phase).name;
  if (held === wanted || (phase === 'rl' && step === 0 && held === 'full fine-tuning')) return null;
  return new ResumeMismatchError('lora', held, wanted);
}

async function saveWeights(dir: string, config: TransformerConfig, params: TransformerParams): Promise<void> {
  const res = await saveCheckpoint(dir, { config, params })();
  if (E.isLeft(res)) throw res.left;
}

/** `OUTPUT/model`: a Hub model directory of `params` with the companions of the model the run started from. */
async function saveHubModel(
  params: TransformerParams,
  pretrained: PretrainedParts,
  out: string,
  dtype: TrainConfig['saveDtype'],
  warn: (warning: OutputWarning) => void,
): Promise<void> {
  const model = join(out, 'model');
  const { skippedCompanions: skipped, saturated } = await savePretrained(model, params, pretrained, dtype);
  if (saturated.length > 0) {
    const which = saturated.map((s) => `${s.name} (${s.count})`).join(', ');
    const message =
      `${model} holds bf16's largest value, 3.3895e38 with its sign, for finite weights past its range, which ` +
      `bf16 would round to infinity (within 0.4% of what was trained; --save-dtype f32 keeps them exact): ${which}`;
    warn({ kind: 'saturated-bf16', message: escapeControls(message), tensors: saturated.map((s) => s.name) });
  }
  if (skipped.length === 0) return;
  const message = escapeControls(
    `${model} was saved without ${skipped.join(', ')} of ${pretrained.dir}: not a regular file there ` +
      '(a symbolic link is not followed out of the model directory); copy what it should hold by hand',
  );
  warn({ kind: 'skipped-companions', message, files: skipped });
}

/**
 * The run's opening line on what it trains, or null without LoRA (nothing to say): which phase trains what, the
 * adapters, and RL's learning rate with where it comes from.
 */
export function describeTraining(cfg: TrainConfig, learningRateGiven: boolean): string | null {
  if (cfg.lora === null && cfg.adapter === null) return null;
  const adapters = cfg.lora
    ? `adapters (r ${cfg.lora.r}, alpha ${cfg.lora.alpha}, scaling ${loraScaling(cfg.lora)}, ` +
      `${cfg.lora.targetModules.length === LORA_MODULES.length ? 'all-linear' : cfg.lora.targetModules.join(',')})`
    : `the adapter of ${cfg.adapter}`;
  const phases =
    cfg.modelDir !== null
      ? `every phase trains ${adapters} on the frozen weights of ${cfg.modelDir}`
      : `the warm-start trains every weight of the new model, then RL trains ${adapters} on that base`;
  const lr = learningRateGiven ? '' : ", LoRA's default (--learning-rate to change)";
  return `LoRA: ${phases}; RL learning rate ${cfg.learningRate}${lr}`;
}

/** The RL phase as a result line names it: `RL`, or `LoRA RL (r 8)`. */
export const rlLabel = (cfg: TrainConfig): string =>
  cfg.lora ? `LoRA RL (r ${cfg.lora.r})` : cfg.adapter ? 'LoRA RL' : 'RL';
