import * as E from 'fp-ts/lib/Either.js';
import { RlvrError } from '../core/errors.js';
import { makeObjective, type BoundObjective } from '../objectives/registry.js';
import { RCC_ADVANTAGES } from '../objectives/rcc.js';
import { join, stat } from '../platform/files.js';
import { TrainConfigError, type TrainConfig } from '../training/config.js';
import { readTrainerState } from '../training/trainer-state.js';
import { flagFor } from './train-flags.js';

/**
 * `rlvr export-config --engine verl|prime-rl`: a `TrainConfig` as the configuration of another engine, for the same
 * objective and hyper-parameters, training with the Python package python/rlvr_objectives (the same losses, proved
 * equal on golden batches) from a Hub model directory. Keys are read from the engines' sources at the versions the
 * package pins (verl b178a3cd: Hydra overrides of verl/trainer/config/ppo_trainer.yaml; prime-rl 559b4477: the
 * TOML of packages/prime-rl-configs). A setting that would change training and has no equivalent is refused,
 * naming its flag; local settings (backend, threads, memory limit, evaluation sizes) are listed as not carried.
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

/** What the exported run starts from and how it was found. */
export interface ExportTarget {
  /** The Hub model directory (OUTPUT/model of a run). */
  readonly modelPath: string;
  /** One line for the header: where the settings came from. */
  readonly source: string;
}

/** The loss name python/rlvr_objectives/verl_plugin.py registers for an objective. */
export const verlLossName = (objective: string): string => `rlvr_${objective}`;
/** The import path of the prime-rl custom loss for an objective (python/rlvr_objectives/prime_rl.py). */
export const primeRlImportPath = (objective: string): string => `rlvr_objectives.prime_rl.${objective}_loss`;

/** The `rlvr train` flag that sets an objective option, for a refusal; options without a flag by their name. */
const optionFlag = (key: string): string => flagFor(`objectiveOptions.${key}`) ?? `objective option ${key}`;

/** Objectives that contrast a group's positives with its negatives (their verl loss needs whole groups). */
const isContrastive = (o: BoundObjective): boolean => o.contrastive;

type Options = Readonly<Record<string, unknown>>;

interface Checked {
  readonly objective: BoundObjective;
  readonly options: Options;
}

/** The objective's full config, and the refusals both engines share. */
function common(engine: Engine, cfg: TrainConfig): E.Either<ExportRefusedError, Checked> {
  const refuse = refuser(engine);
  const bound = makeObjective(cfg.objective, cfg.objectiveOptions);
  if (E.isLeft(bound)) return refuse(optionFlag(bound.left.field), bound.left.message);
  if (cfg.bicc)
    return refuse(
      '--bicc',
      'is not carried: BICC scores each rollout under a second context built from its group (a second forward ' +
        'pass), which neither engine does (README, "Scaling past one machine")',
    );
  if (cfg.advantage === 'rcc' && !bound.right.usesAdvantages)
    return refuse('--advantage', `rcc does not apply: ${cfg.objective} does not weigh rollouts by advantages`);
  if (cfg.adapter !== null) return refuse('--adapter', 'is not carried: merge it (--merge-lora) and export the model');
  return E.right({ objective: bound.right, options: bound.right.config as unknown as Options });
}

/** What the exported configuration does not carry, for its header. */
const NOT_CARRIED =
  'not carried (local settings): backend, threads, memory limit, on-non-finite, eval prompts and k, save dtype; ' +
  'the supervised warm-start (its result is the model exported)';

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
/** A shell parameter the user must set: `${NAME:?why}` (bash stops with `why` when it is unset). */
const required = (name: string, why: string): string => `$${'{'}${name}:?${why}}`;

/**
 * verl: a shell script that sets the two environment variables the package reads and runs verl's trainer with
 * Hydra overrides, one per line.
 */
export function verlConfig(cfg: TrainConfig, target: ExportTarget): E.Either<ExportRefusedError, string> {
  return E.chain((checked: Checked) => verlScript(cfg, target, checked))(common('verl', cfg));
}

/** A refusal of `engine`, as the Either the writers return. */
const refuser =
  (engine: Engine) =>
  (flag: string, why: string): E.Either<ExportRefusedError, never> =>
    E.left(new ExportRefusedError(engine, flag, why));

function verlScript(cfg: TrainConfig, target: ExportTarget, checked: Checked): E.Either<ExportRefusedError, string> {
  const { objective, options: o } = checked;
  const refuse = refuser('verl');
  const overrides: [string, string | number | boolean][] = [];
  const set = (key: string, value: string | number | boolean): void => {
    overrides.push([key, value]);
  };
  const actor = 'actor_rollout_ref.actor';
  const contrastive = isContrastive(objective);
  set('algorithm.adv_estimator', cfg.advantage === 'rcc' ? 'rlvr_rcc' : contrastive ? 'rlvr_contrast' : 'rlvr_group');
  set('algorithm.use_kl_in_reward', false);
  set(`${actor}.policy_loss.loss_mode`, verlLossName(cfg.objective));
  // verl's own keys for the options it has; the package reads them from the actor config (verl_plugin.py).
  if (['grpo', 'dapo', 'dr_grpo', 'gspo'].includes(cfg.objective)) {
    set(`${actor}.clip_ratio_low`, o.epsilon as number);
    set(`${actor}.clip_ratio_high`, o.epsilonHigh as number);
  }
  if (cfg.objective === 'sapo') {
    set(`${actor}.tau_pos`, o.temperaturePos as number);
    set(`${actor}.tau_neg`, o.temperatureNeg as number);
  }
  const VERL_AGG = { grpo: 'seq-mean-token-mean', dapo: 'token-mean', dr_grpo: 'seq-mean-token-sum-norm' } as const;
  if ('lossType' in o) {
    const lt = o.lossType as string;
    if (!(lt in VERL_AGG))
      return refuse(
        optionFlag('lossType'),
        `${lt} has no verl loss_agg_mode: verl's token-mean divides by the whole batch's tokens (dapo)`,
      );
    set(`${actor}.loss_agg_mode`, VERL_AGG[lt as keyof typeof VERL_AGG]);
    if (lt === 'dr_grpo')
      set(`${actor}.loss_scale_factor`, (o.maxCompletionLength as number | null) ?? cfg.maxCompletionLength);
  } else {
    // GMPO, DisCO and ConSPO take the KL term (and verl its entropy) as a token mean.
    set(`${actor}.loss_agg_mode`, 'token-mean');
  }
  // The KL to the reference is verl's use_kl_loss with low_var_kl, the k3 estimator the objectives use; RCC needs
  // the reference log-probs too (a coefficient of 0 keeps them without a KL term).
  const beta = objective.klToReference ? (o.beta as number) : 0;
  const needsReference = beta > 0 || cfg.advantage === 'rcc';
  set(`${actor}.use_kl_loss`, needsReference);
  if (needsReference) {
    set(`${actor}.kl_loss_coef`, beta);
    set(`${actor}.kl_loss_type`, 'low_var_kl');
  }
  set('actor_rollout_ref.model.path', target.modelPath);
  set('data.train_batch_size', cfg.promptsPerStep);
  set('data.max_response_length', cfg.maxCompletionLength);
  set('data.seed', cfg.seed);
  set('actor_rollout_ref.rollout.n', cfg.numGenerations);
  set('actor_rollout_ref.rollout.temperature', cfg.temperature);
  set('actor_rollout_ref.rollout.top_p', cfg.topP);
  set(`${actor}.optim.lr`, cfg.learningRate);
  set(`${actor}.optim.lr_warmup_steps`, cfg.warmupSteps);
  // The project's schedule: linear warmup, then cosine decay to 0 (src/nn/schedule.ts).
  set(`${actor}.optim.lr_scheduler_type`, 'cosine');
  set(`${actor}.optim.min_lr_ratio`, 0);
  set(`${actor}.optim.weight_decay`, cfg.weightDecay);
  set(`${actor}.grad_clip`, cfg.maxGradNorm);
  set(`${actor}.ppo_epochs`, cfg.numIterations);
  set(`${actor}.ppo_mini_batch_size`, cfg.groupsPerMinibatch ?? cfg.promptsPerStep);
  if (contrastive) {
    // A contrastive loss sees one micro-batch: each group must stay whole inside one (verl_plugin.py).
    set('trainer.balance_batch', false);
    set(`${actor}.use_dynamic_bsz`, false);
    set(`${actor}.ppo_micro_batch_size_per_gpu`, cfg.numGenerations);
  }
  set('actor_rollout_ref.model.enable_gradient_checkpointing', cfg.gradientCheckpointing);
  if (cfg.lora !== null) {
    if (cfg.lora.dropout !== 0) return refuse('--lora-dropout', 'has no verl key (its LoRA has no dropout setting)');
    if (cfg.lora.useRslora) return refuse('--use-rslora', 'has no verl key');
    set('actor_rollout_ref.model.lora_rank', cfg.lora.r);
    set('actor_rollout_ref.model.lora_alpha', cfg.lora.alpha);
    const modules = cfg.lora.targetModules;
    set('actor_rollout_ref.model.target_modules', typeof modules === 'string' ? modules : `[${modules.join(',')}]`);
  }
  set('trainer.total_training_steps', cfg.steps);
  set('trainer.test_freq', cfg.evalEvery > 0 ? cfg.evalEvery : -1);
  // checkpointEvery 0 saves at the end only; verl saves at the last step whenever save_freq > 0.
  set('trainer.save_freq', cfg.checkpointEvery > 0 ? cfg.checkpointEvery : Math.max(1, cfg.steps));
  set('custom_reward_function.name', 'compute_score');

  // The options verl has no key for travel in the environment; beta is verl's (use_kl_loss), except DisCO's.
  const options = objective.klToReference ? { ...o, beta: 0 } : o;
  const run = {
    objective: cfg.objective,
    options,
    totalSteps: cfg.steps,
    ...(cfg.advantage === 'rcc' ? { rcc: { ...RCC_ADVANTAGES, deltaMode: cfg.rccDelta } } : {}),
  };
  const modules = ['rlvr_objectives.verl_plugin', ...(cfg.advantage === 'rcc' ? ['rlvr_objectives.verl_rcc'] : [])];
  const value = (v: string | number | boolean): string =>
    typeof v === 'string' && /^[A-Za-z0-9_./,[\]-]+$/.test(v) ? v : typeof v === 'string' ? shellQuote(v) : String(v);
  const lines = [
    '#!/usr/bin/env bash',
    `# rlvr export-config --engine verl: objective ${cfg.objective}${cfg.advantage === 'rcc' ? ' with RCC advantages' : ''}, for verl ${VERL_COMMIT}.`,
    `# ${target.source}`,
    `# ${NOT_CARRIED}.`,
    "# Needs: pip install this repository's python/ (rlvr_objectives) beside verl; the prompts as verl parquet files",
    '# (prompt, data_source, reward_model.ground_truth = the answer) in RLVR_TRAIN_PARQUET and RLVR_VAL_PARQUET.',
    'set -euo pipefail',
    `export VERL_USE_EXTERNAL_MODULES=${modules.join(',')}`,
    `export RLVR_OBJECTIVE_CONFIG=${shellQuote(JSON.stringify(run))}`,
    'REWARD_FILE="$(python3 -c \'import rlvr_objectives.boxed as b; print(b.__file__)\')"',
    'python3 -m verl.trainer.main_ppo \\',
    `  data.train_files="${required('RLVR_TRAIN_PARQUET', 'the training prompts, a verl parquet file')}" \\`,
    `  data.val_files="${required('RLVR_VAL_PARQUET', 'the held-out prompts, a verl parquet file')}" \\`,
    '  custom_reward_function.path="$REWARD_FILE" \\',
    ...overrides.map(([k, v], i) => `  ${k}=${value(v)}${i === overrides.length - 1 ? ' "$@"' : ' \\'}`),
    '',
  ];
  return E.right(lines.join('\n'));
}

/** A TOML value: numbers, booleans, strings (JSON's escapes are TOML basic-string escapes for these). */
function toml(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(v);
  if (typeof v === 'boolean') return String(v);
  return JSON.stringify(String(v));
}

/** prime-rl: an RL config file (TOML) with the custom loss. */
export function primeRlConfig(cfg: TrainConfig, target: ExportTarget): E.Either<ExportRefusedError, string> {
  return E.chain((checked: Checked) => primeRlToml(cfg, target, checked))(common('prime-rl', cfg));
}

/** The objectives python/rlvr_objectives/prime_rl.py carries (a per-sequence loss cannot see a group). */
export const PRIME_RL_OBJECTIVES: readonly string[] = ['grpo', 'dapo', 'dr_grpo', 'gspo', 'cispo', 'sapo'];

function primeRlToml(cfg: TrainConfig, target: ExportTarget, checked: Checked): E.Either<ExportRefusedError, string> {
  const { objective, options: o } = checked;
  const refuse = refuser('prime-rl');
  if (!PRIME_RL_OBJECTIVES.includes(cfg.objective))
    return refuse(
      '--objective',
      `${cfg.objective} is not carried: prime-rl calls a custom loss per sequence, which cannot see the ` +
        `sequence's group${cfg.objective === 'gmpo' ? " (nor GMPO's 1/B sequence mean under its token-count normaliser)" : ''}`,
    );
  if (cfg.advantage === 'rcc')
    return refuse('--advantage', 'rcc is not carried: prime-rl computes advantages in its orchestrator (r - mean)');
  if (objective.klToReference)
    return refuse(
      optionFlag('beta'),
      `${o.beta} needs reference log-probs, which prime-rl's grpo algorithm does not ship`,
    );
  if (o.lossType !== 'dapo')
    return refuse(
      optionFlag('lossType'),
      `${o.lossType} is not carried: prime-rl divides the summed sequence losses by its global token count, ` +
        'which is dapo (--loss-type dapo)',
    );
  if (o.scaleRewards !== 'none')
    return refuse(
      optionFlag('scaleRewards'),
      `${o.scaleRewards} is not carried: prime-rl's grpo advantage is r - mean, unscaled (--scale-rewards none)`,
    );
  for (const key of ['dynamicSampling', 'overlong'])
    if (o[key]) return refuse(optionFlag(key), 'needs the whole group, which a per-sequence loss does not see');
  if (cfg.numIterations !== 1)
    return refuse('--num-iterations', `${cfg.numIterations}: prime-rl takes one optimizer step per batch`);
  if (cfg.groupsPerMinibatch !== null && cfg.groupsPerMinibatch < cfg.promptsPerStep)
    return refuse('--groups-per-minibatch', 'has no prime-rl key: it takes one optimizer step per batch');
  if (cfg.temperature > 2) return refuse('--temperature', `${cfg.temperature}: prime-rl allows at most 2`);
  if (cfg.lora !== null) return refuse('--lora-r', 'is not carried to prime-rl by this exporter (LoRA)');

  const kwargs = Object.entries(o).filter(([k, v]) => v !== null && k !== 'numGenerations');
  const lines = [
    `# rlvr export-config --engine prime-rl: objective ${cfg.objective}, for prime-rl ${PRIME_RL_COMMIT}.`,
    `# ${target.source}`,
    `# ${NOT_CARRIED}.`,
    "# Needs rlvr_objectives (this repository's python/) importable by the trainer, and an environment",
    '# ([[orchestrator.train.source]]) whose rubric rewards with rlvr_objectives.boxed.compute_score.',
    `max_steps = ${cfg.steps}`,
    '',
    '[model]',
    `name = ${toml(target.modelPath)}`,
    '',
    '[trainer.loss]',
    'type = "custom"',
    `import_path = ${toml(primeRlImportPath(cfg.objective))}`,
    '',
    '[trainer.loss.kwargs]',
    ...kwargs.map(([k, v]) => `${k} = ${toml(v)}`),
    '',
    '[trainer.optim]',
    'type = "adamw"',
    `lr = ${toml(cfg.learningRate)}`,
    `weight_decay = ${toml(cfg.weightDecay)}`,
    `max_norm = ${toml(cfg.maxGradNorm)}`,
    '',
    "# The project's schedule: linear warmup, then cosine decay to 0 (src/nn/schedule.ts).",
    '[trainer.scheduler]',
    'type = "cosine"',
    `warmup_steps = ${cfg.warmupSteps}`,
    'min_lr = 0.0',
    '',
    ...(cfg.gradientCheckpointing ? ['[trainer.model.ac]', 'freq = 1', ''] : []),
    '[orchestrator]',
    `batch_size = ${cfg.promptsPerStep * cfg.numGenerations}`,
    `group_size = ${cfg.numGenerations}`,
    '',
    '[orchestrator.train.sampling]',
    `temperature = ${toml(cfg.temperature)}`,
    `max_completion_tokens = ${cfg.maxCompletionLength}`,
    ...(cfg.topP < 1 ? ['', '[orchestrator.train.sampling.extra_body]', `top_p = ${toml(cfg.topP)}`] : []),
    ...(cfg.evalEvery > 0 ? ['', '[orchestrator.eval]', `interval = ${cfg.evalEvery}`] : []),
    ...(cfg.checkpointEvery > 0 ? ['', '[ckpt]', `interval = ${cfg.checkpointEvery}`] : []),
    '',
  ];
  return E.right(lines.join('\n'));
}

export function exportConfig(
  engine: Engine,
  cfg: TrainConfig,
  target: ExportTarget,
): E.Either<ExportRefusedError, string> {
  return engine === 'verl' ? verlConfig(cfg, target) : primeRlConfig(cfg, target);
}

/** `rlvr export-config`'s parsed arguments (args.ts `parseExportArgs`). */
export interface ExportArgs {
  readonly engine: Engine;
  /** A run directory (its --output) to read the objective from, or null. */
  readonly run: string | null;
  /** The train flags' config (defaults for what is not given). */
  readonly cfg: TrainConfig;
}

const isDirectory = async (path: string): Promise<boolean> => {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
};

/**
 * The config to export and the model it starts from. With `--run DIR`: the objective, its parsed options, the
 * advantage and BICC the run recorded in DIR/checkpoint (validated as a resume validates them), and DIR/model;
 * without: the command's settings and OUTPUT/model of --output, else --model.
 */
export async function resolveExport(
  args: ExportArgs,
): Promise<E.Either<RlvrError, { engine: Engine; cfg: TrainConfig; target: ExportTarget }>> {
  const { engine, run } = args;
  if (run === null) {
    const model = args.cfg.outputDir !== null ? join(args.cfg.outputDir, 'model') : args.cfg.modelDir;
    if (model === null)
      return E.left(
        new TrainConfigError('--output', null, 'is needed (or --run, or --model): the model to start from'),
      );
    return E.right({ engine, cfg: args.cfg, target: { modelPath: model, source: 'settings from the command line' } });
  }
  const checkpoint = join(run, 'checkpoint');
  if (!(await isDirectory(checkpoint)))
    return E.left(new TrainConfigError('--run', run, "has no checkpoint/ (give a run's --output directory)"));
  const state = await readTrainerState(checkpoint);
  if (E.isLeft(state)) return state;
  const id = state.right.identity;
  const model = join(run, 'model');
  if (!(await isDirectory(model)))
    return E.left(
      new TrainConfigError('--run', run, 'has no model/ directory (a run started from --model writes one)'),
    );
  const cfg: TrainConfig = {
    ...args.cfg,
    task: id.task as TrainConfig['task'],
    digits: id.digits,
    objective: id.objective as TrainConfig['objective'],
    objectiveOptions: id.objectiveConfig as TrainConfig['objectiveOptions'],
    advantage: id.advantage as TrainConfig['advantage'],
    rccDelta: id.rccDelta as TrainConfig['rccDelta'],
    bicc: id.bicc,
  };
  const at = `${state.right.phase} step ${state.right.step}`;
  const source = `objective, options, advantage and BICC from ${checkpoint} (${at}); the rest from the command line`;
  return E.right({ engine, cfg, target: { modelPath: model, source } });
}
