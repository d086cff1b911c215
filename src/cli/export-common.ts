import * as E from 'fp-ts/lib/Either.js';
import { RlvrError } from '../core/errors.js';
import type { LoraConfig } from '../nn/lora.js';
import { type BoundObjective, makeObjective } from '../objectives/registry.js';
import { TRAIN_DEFAULTS, type TrainConfig } from '../training/config.js';
import { commentText } from './engine-text.js';
import { flagFor } from './train-flags.js';

/**
 * What the verl and prime-rl writers share (`export-config.ts` is the command): the engines and their pinned
 * versions, the refusal, what the exported run starts from, the checks both engines make, and the account of
 * every `rlvr train` flag an engine does not carry (the header's "not carried" line).
 */

export const ENGINES = ['verl', 'prime-rl'] as const;
export type Engine = (typeof ENGINES)[number];

/** The pinned versions (python/rlvr_objectives/__init__.py states the same). */
export const VERL_COMMIT = 'b178a3cd56f58b2d502255daba591e92833930a7';
export const PRIME_RL_COMMIT = '559b44772e471d1538537b8805cc77f3824a5e64';

/** A setting the engine cannot carry: the flag (or objective option) and why. */
export class ExportRefusedError extends RlvrError {
  constructor(
    readonly engine: Engine,
    readonly flag: string,
    reason: string,
  ) {
    super(`export-config --engine ${engine}: ${flag} ${reason}`);
  }
}

/** The LoRA adapters the exported run trains: their config, and the trained adapter it continues (or none). */
export interface ExportLora {
  readonly config: LoraConfig;
  /**
   * A trained peft adapter directory to continue (verl's `lora_adapter_path`), and the flag that named it
   * (`--adapter`, or `--run` for a run's unmerged adapter); null: fresh adapters.
   */
  readonly adapter: { readonly path: string; readonly flag: string } | null;
}

/** What the exported run starts from and how it was found. */
export interface ExportTarget {
  /** The Hub model directory (OUTPUT/model of a run; with `lora.adapter`, the base it was trained on). */
  readonly modelPath: string;
  /** One line for the header: where the settings came from. */
  readonly source: string;
  /** LoRA as resolved from the run or the flags; absent: the config's `lora` (fresh adapters), if any. */
  readonly lora?: ExportLora | null;
}

/** The loss name python/rlvr_objectives/verl_plugin.py registers for an objective. */
export const verlLossName = (objective: string): string => `rlvr_${objective}`;
/** The import path of the prime-rl custom loss for an objective (python/rlvr_objectives/prime_rl.py). */
export const primeRlImportPath = (objective: string): string => `rlvr_objectives.prime_rl.${objective}_loss`;

/** The `rlvr train` flag that sets an objective option, for a refusal; options without a flag by their name. */
export const optionFlag = (key: string): string => flagFor(`objectiveOptions.${key}`) ?? `objective option ${key}`;

export type Options = Readonly<Record<string, unknown>>;

export interface Checked {
  readonly objective: BoundObjective;
  readonly options: Options;
  readonly lora: ExportLora | null;
}

/** A refusal of `engine`, as the Either the writers return. */
export const refuser =
  (engine: Engine) =>
  (flag: string, why: string): E.Either<ExportRefusedError, never> =>
    E.left(new ExportRefusedError(engine, flag, why));

/** The largest LoRA rank vLLM serves (its MaxLoRARanks; prime-rl's inference.py VALID_VLLM_LORA_RANKS). */
export const VLLM_MAX_LORA_RANK = 512;

/** BICC's options by flag: each changes only what `--bicc` does. */
const BICC_OPTIONS = [
  ['biccPlacement', '--bicc-placement'],
  ['biccRatio', '--bicc-ratio'],
  ['biccSides', '--bicc-sides'],
  ['biccContextShare', '--bicc-context-share'],
] as const;

/** The objective's full config, the LoRA the run trains, and the refusals both engines share. */
export function common(engine: Engine, cfg: TrainConfig, target: ExportTarget): E.Either<ExportRefusedError, Checked> {
  const refuse = refuser(engine);
  const bound = makeObjective(cfg.objective, cfg.objectiveOptions);
  if (E.isLeft(bound)) return refuse(optionFlag(bound.left.field), bound.left.message);
  if (cfg.bicc)
    return refuse(
      '--bicc',
      'is not carried: BICC scores each rollout under a second context built from its group (a second forward ' +
        'pass), which neither engine does (README, "Scaling past one machine")',
    );
  for (const [key, flag] of BICC_OPTIONS)
    if (cfg[key] !== TRAIN_DEFAULTS[key])
      return refuse(flag, 'is not carried: it sets how BICC conditions rollouts, and BICC is not carried (--bicc)');
  if (cfg.advantage === 'rcc' && !bound.right.usesAdvantages)
    return refuse('--advantage', `rcc does not apply: ${cfg.objective} does not weigh rollouts by advantages`);
  if (cfg.advantage !== 'rcc' && cfg.rccDelta !== TRAIN_DEFAULTS.rccDelta)
    return refuse('--rcc-delta', 'applies only with --advantage rcc');
  const lora = target.lora !== undefined ? target.lora : cfg.lora !== null ? { config: cfg.lora, adapter: null } : null;
  if (target.lora === undefined && cfg.adapter !== null)
    return refuse('--adapter', 'is carried only with its adapter_config.json read (as rlvr export-config reads it)');
  if (lora !== null && lora.config.r > VLLM_MAX_LORA_RANK)
    return refuse('--lora-r', `${lora.config.r}: vLLM, which both engines sample with, serves ranks up to 512`);
  return E.right({ objective: bound.right, options: bound.right.config as unknown as Options, lora });
}

/** `rlvr train` flags that only this machine's run reads. */
const LOCAL_FLAGS = [
  '--backend',
  '--threads',
  '--memory-limit-gb',
  '--allow-over-host-memory',
  '--allow-non-finite-weights',
  '--on-non-finite',
  '--save-dtype',
  '--merge-lora',
  '--overwrite',
  '--resume',
  '--eval-prompts',
  '--eval-k',
];
const WARM_START_FLAGS = [
  '--warm-start-steps',
  '--warm-start-until',
  '--warm-start-batch-size',
  '--warm-start-learning-rate',
  '--warm-start-context-share',
];
const MODEL_SIZE_FLAGS = ['--d-model', '--n-layers', '--n-heads', '--n-kv-heads'];

/**
 * The flags each engine's configuration does not carry, and why: every other `rlvr train` flag is carried or
 * refused by name (spec/engines/export-flags.spec.ts checks each). The prompts (task, digits, dataset) are the
 * data files' to hold, which `rlvr export-data` writes from the same flags; prime-rl has no run seed (its
 * environment draws the prompts), and its evaluation needs an environment source of its own.
 */
export const NOT_CARRIED: Readonly<Record<Engine, readonly (readonly [string, readonly string[]])[]>> = {
  verl: [
    ['local settings', LOCAL_FLAGS],
    ['the supervised warm-start (its result is the model the engine starts from)', WARM_START_FLAGS],
    ["a new model's size (the engine starts from a Hub model)", MODEL_SIZE_FLAGS],
    ['the prompts (the parquet files hold them)', ['--task', '--digits', '--dataset']],
  ],
  'prime-rl': [
    ['local settings', LOCAL_FLAGS],
    ['the supervised warm-start (its result is the model the engine starts from)', WARM_START_FLAGS],
    ["a new model's size (the engine starts from a Hub model)", MODEL_SIZE_FLAGS],
    [
      'the prompts (the environment holds them; prime-rl has no run seed)',
      ['--task', '--digits', '--dataset', '--seed'],
    ],
    ['evaluation (an [orchestrator.eval] needs an environment source: add one with interval = N)', ['--eval-every']],
  ],
};

/** The header's "not carried" line, as a comment. */
export const notCarriedLine = (engine: Engine): string =>
  `# not carried: ${NOT_CARRIED[engine].map(([why, flags]) => `${why}: ${flags.join(', ')}`).join('; ')}.`;

/** The header line naming the run's prompts, which the data files must hold (a comment: its values escaped). */
export function promptsLine(cfg: TrainConfig): string {
  const digits =
    cfg.digits === null ? '' : ` --digits ${typeof cfg.digits === 'number' ? cfg.digits : cfg.digits.join(',')}`;
  const flags = cfg.dataset !== null ? `--dataset ${cfg.dataset}` : `--task ${cfg.task}${digits}`;
  return `# The run's prompts: ${commentText(`${flags} --seed ${cfg.seed}`)} (rlvr export-data with these flags writes them).`;
}
