import * as E from 'fp-ts/lib/Either.js';
import { LORA_MODULES } from '../nn/lora.js';
import { RCC_ADVANTAGES } from '../objectives/rcc.js';
import type { TrainConfig } from '../training/config.js';
import { commentText, hydraPlainPath, omegaConfText, shellArg, shellWord, unwritable } from './engine-text.js';
import {
  type Checked,
  common,
  type ExportRefusedError,
  type ExportTarget,
  notCarriedLine,
  optionFlag,
  promptsLine,
  refuser,
  VERL_COMMIT,
  verlLossName,
} from './export-common.js';

/**
 * verl: a bash script that sets the environment the package reads and runs verl's trainer with Hydra overrides,
 * one per line. Keys and the checks they satisfy are read from verl's source at VERL_COMMIT
 * (verl/trainer/config/ppo_trainer.yaml and its parts, verl/workers/config/*.py, verl/utils/config.py
 * `validate_config`); spec/engines/export-verl-required.spec.ts lists what that source requires, with its lines.
 */

/**
 * A value of an override: a number or boolean; a `word`, a fixed token of ours (a loss name, `vllm`); or `text`,
 * a string from outside (a path), written bare where Hydra and bash read it as itself, else carried in the
 * environment variable `env` and read back by OmegaConf (`${oc.env:NAME}`), escaped for it, so that no character
 * of it is read by bash, Hydra's grammar or an interpolation.
 */
type Value =
  | number
  | boolean
  | { readonly word: string }
  | { readonly text: string; readonly env: string; readonly what: string };

const word = (w: string): Value => ({ word: w });
/** `${inner}`: a bash parameter expansion or an OmegaConf interpolation, as the script's text. */
const braced = (inner: string): string => `$${'{'}${inner}}`;

/** The objectives whose verl key for the clip range is clip_ratio_low/high (the others read it from the JSON). */
const CLIPPED = ['grpo', 'dapo', 'dr_grpo', 'gspo'];
const VERL_AGG = { grpo: 'seq-mean-token-mean', dapo: 'token-mean', dr_grpo: 'seq-mean-token-sum-norm' } as const;

/**
 * LoRA's target modules as verl's `target_modules`, a string (HFModelConfig types it `Optional[str]` and
 * fsdp_workers.py converts the model config to it, so a list is refused): `all-linear` for every linear layer
 * (peft's name for the seven projections of a Llama/Qwen layer), else a regex peft matches against the whole
 * module name.
 */
export function verlTargetModules(modules: readonly string[]): string {
  return LORA_MODULES.every((m) => modules.includes(m)) ? 'all-linear' : `.*[.](${modules.join('|')})`;
}

export function verlConfig(cfg: TrainConfig, target: ExportTarget): E.Either<ExportRefusedError, string> {
  return E.chain((checked: Checked) => verlScript(cfg, target, checked))(common('verl', cfg, target));
}

function verlScript(cfg: TrainConfig, target: ExportTarget, checked: Checked): E.Either<ExportRefusedError, string> {
  const { objective, options: o, lora } = checked;
  const refuse = refuser('verl');
  const overrides: [string, Value][] = [];
  const set = (key: string, value: Value): void => {
    overrides.push([key, value]);
  };
  const actor = 'actor_rollout_ref.actor';
  const contrastive = objective.contrastive;
  set(
    'algorithm.adv_estimator',
    word(cfg.advantage === 'rcc' ? 'rlvr_rcc' : contrastive ? 'rlvr_contrast' : 'rlvr_group'),
  );
  set('algorithm.use_kl_in_reward', false);
  set(`${actor}.policy_loss.loss_mode`, word(verlLossName(cfg.objective)));
  // verl's own keys for the options it has; the package reads them from the actor config (verl_plugin.py).
  if (CLIPPED.includes(cfg.objective)) {
    set(`${actor}.clip_ratio_low`, o.epsilon as number);
    set(`${actor}.clip_ratio_high`, o.epsilonHigh as number);
  }
  // verl's dual clip, which the package's GRPO family reads as vanilla does; verl's default is 3.0, so the
  // project's default (off) is written as inf, which Hydra reads as a float.
  if ('dualClip' in o) set(`${actor}.clip_ratio_c`, (o.dualClip as number | null) ?? word('inf'));
  if (cfg.objective === 'sapo') {
    set(`${actor}.tau_pos`, o.temperaturePos as number);
    set(`${actor}.tau_neg`, o.temperatureNeg as number);
  }
  if ('lossType' in o) {
    const lt = o.lossType as string;
    if (!(lt in VERL_AGG))
      return refuse(
        optionFlag('lossType'),
        `${lt} has no verl loss_agg_mode: verl's token-mean divides by the whole batch's tokens (dapo)`,
      );
    set(`${actor}.loss_agg_mode`, word(VERL_AGG[lt as keyof typeof VERL_AGG]));
    if (lt === 'dr_grpo')
      set(`${actor}.loss_scale_factor`, (o.maxCompletionLength as number | null) ?? cfg.maxCompletionLength);
  } else {
    // GMPO, DisCO and ConSPO take the KL term (and verl its entropy) as a token mean.
    set(`${actor}.loss_agg_mode`, word('token-mean'));
  }
  // The KL to the reference is verl's use_kl_loss with low_var_kl, the k3 estimator the objectives use; RCC needs
  // the reference log-probs too (a coefficient of 0 keeps them without a KL term).
  const beta = objective.klToReference ? (o.beta as number) : 0;
  const needsReference = beta > 0 || cfg.advantage === 'rcc';
  set(`${actor}.use_kl_loss`, needsReference);
  if (needsReference) {
    set(`${actor}.kl_loss_coef`, beta);
    set(`${actor}.kl_loss_type`, word('low_var_kl'));
  }
  set('actor_rollout_ref.model.path', { text: target.modelPath, env: 'RLVR_MODEL_PATH', what: 'the model path' });
  set('data.train_batch_size', cfg.promptsPerStep);
  set('data.max_response_length', cfg.maxCompletionLength);
  set('data.seed', cfg.seed);
  // Required at this commit: the rollout engine (rollout.py `name = MISSING`); vLLM, the one verl's LoRA uses.
  set('actor_rollout_ref.rollout.name', word('vllm'));
  set('actor_rollout_ref.rollout.tensor_model_parallel_size', 1);
  set('actor_rollout_ref.rollout.n', cfg.numGenerations);
  set('actor_rollout_ref.rollout.temperature', cfg.temperature);
  set('actor_rollout_ref.rollout.top_p', cfg.topP);
  set(`${actor}.optim.lr`, cfg.learningRate);
  set(`${actor}.optim.lr_warmup_steps`, cfg.warmupSteps);
  // The project's schedule: linear warmup, then cosine decay to 0 (src/nn/schedule.ts).
  set(`${actor}.optim.lr_scheduler_type`, word('cosine'));
  set(`${actor}.optim.min_lr_ratio`, 0);
  set(`${actor}.optim.weight_decay`, cfg.weightDecay);
  set(`${actor}.grad_clip`, cfg.maxGradNorm);
  set(`${actor}.ppo_epochs`, cfg.numIterations);
  set(`${actor}.ppo_mini_batch_size`, Math.min(cfg.groupsPerMinibatch ?? cfg.promptsPerStep, cfg.promptsPerStep));
  // Without dynamic batch sizes verl requires a micro-batch size for the actor's update, the rollout's old
  // log-probs and the reference's (actor.py __post_init__, utils/config.py validate_config). One group per
  // micro-batch: a contrastive loss sees one micro-batch, so each group must stay whole inside one
  // (verl_plugin.py), and verl scales every loss by the global batch, so the size changes memory, not the loss.
  set(`${actor}.use_dynamic_bsz`, false);
  set(`${actor}.ppo_micro_batch_size_per_gpu`, cfg.numGenerations);
  set('actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu', cfg.numGenerations);
  set('actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu', cfg.numGenerations);
  if (contrastive) set('trainer.balance_batch', false);
  set('actor_rollout_ref.model.enable_gradient_checkpointing', cfg.gradientCheckpointing);
  if (lora !== null) {
    const l = lora.config;
    set('actor_rollout_ref.model.lora_rank', l.r);
    if (lora.adapter !== null) {
      // peft loads the adapter with its own adapter_config.json (fsdp_workers.py: PeftModel.from_pretrained), so
      // its alpha, modules, dropout and rsLoRA are carried; lora_rank sizes vLLM's adapter slots.
      set('actor_rollout_ref.model.lora_adapter_path', {
        text: lora.adapter.path,
        env: 'RLVR_ADAPTER_PATH',
        what: 'the adapter path',
      });
    } else {
      if (l.dropout !== 0) return refuse('--lora-dropout', 'has no verl key (its LoRA has no dropout setting)');
      if (l.useRslora) return refuse('--use-rslora', 'has no verl key (its LoRA scales by lora_alpha / r)');
      if (!Number.isInteger(l.alpha))
        return refuse('--lora-alpha', `${l.alpha}: verl's lora_alpha is an integer (workers/config/model.py)`);
      set('actor_rollout_ref.model.lora_alpha', l.alpha);
      set('actor_rollout_ref.model.target_modules', {
        text: verlTargetModules(l.targetModules),
        env: 'RLVR_LORA_TARGETS',
        what: '--lora-target-modules',
      });
    }
    // verl's LoRA docs: vLLM must load the base model's weights itself.
    set('actor_rollout_ref.rollout.load_format', word('safetensors'));
  }
  set('trainer.total_training_steps', cfg.steps);
  set('trainer.test_freq', cfg.evalEvery > 0 ? cfg.evalEvery : -1);
  // checkpointEvery 0 saves at the end only; verl saves at the last step whenever save_freq > 0.
  set('trainer.save_freq', cfg.checkpointEvery > 0 ? cfg.checkpointEvery : Math.max(1, cfg.steps));
  // verl's default loggers include wandb, which needs an account: the console starts anywhere.
  set('trainer.logger', word('[console]'));
  set('custom_reward_function.name', word('compute_score'));

  const texts = overrides.flatMap(([key, v]) => (typeof v === 'object' && 'text' in v ? [[key, v] as const] : []));
  for (const [key, v] of texts) {
    const why = unwritable(v.text);
    if (why) return refuse(v.what, `(${key}) ${why}`);
  }
  // The options verl has no key for travel in the environment; beta is verl's (use_kl_loss), except DisCO's.
  const options = objective.klToReference ? { ...o, beta: 0 } : o;
  const run = {
    objective: cfg.objective,
    options,
    totalSteps: cfg.steps,
    ...(cfg.advantage === 'rcc' ? { rcc: { ...RCC_ADVANTAGES, deltaMode: cfg.rccDelta } } : {}),
  };
  const modules = ['rlvr_objectives.verl_plugin', ...(cfg.advantage === 'rcc' ? ['rlvr_objectives.verl_rcc'] : [])];
  const inEnv = texts.filter(([, v]) => !hydraPlainPath(v.text));
  const value = (v: Value): string =>
    typeof v !== 'object'
      ? String(v)
      : 'word' in v
        ? v.word
        : hydraPlainPath(v.text)
          ? v.text
          : braced(`oc.env:${v.env}`);
  const lines = [
    '#!/usr/bin/env bash',
    `# rlvr export-config --engine verl: objective ${cfg.objective}${cfg.advantage === 'rcc' ? ' with RCC advantages' : ''}, for verl ${VERL_COMMIT}.`,
    `# ${commentText(target.source)}`,
    notCarriedLine('verl'),
    promptsLine(cfg),
    "# Needs: pip install this repository's python/ (rlvr_objectives) beside verl; the prompts as verl parquet files",
    '# (prompt, data_source, reward_model.ground_truth = the answer) in RLVR_TRAIN_PARQUET and RLVR_VAL_PARQUET.',
    '# GPUs: RLVR_GPUS_PER_NODE and RLVR_NNODES (default 1 and 1); further Hydra overrides may follow the script.',
    'set -euo pipefail',
    `: "${braced('RLVR_TRAIN_PARQUET:?the training prompts, a verl parquet file')}"`,
    `: "${braced('RLVR_VAL_PARQUET:?the held-out prompts, a verl parquet file')}"`,
    'export RLVR_TRAIN_PARQUET RLVR_VAL_PARQUET',
    `export VERL_USE_EXTERNAL_MODULES=${modules.join(',')}`,
    `export RLVR_OBJECTIVE_CONFIG=${shellWord(JSON.stringify(run))}`,
    // Read by OmegaConf through oc.env: their text reaches verl exactly, whatever it holds.
    ...inEnv.map(([, v]) => `export ${v.env}=${shellWord(omegaConfText(v.text))}`),
    'REWARD_FILE="$(python3 -c \'import rlvr_objectives.boxed as b; print(b.__file__)\')"',
    'export REWARD_FILE',
    'python3 -m verl.trainer.main_ppo \\',
    `  'data.train_files=${braced('oc.env:RLVR_TRAIN_PARQUET')}' \\`,
    `  'data.val_files=${braced('oc.env:RLVR_VAL_PARQUET')}' \\`,
    `  'custom_reward_function.path=${braced('oc.env:REWARD_FILE')}' \\`,
    `  trainer.n_gpus_per_node="${braced('RLVR_GPUS_PER_NODE:-1')}" \\`,
    `  trainer.nnodes="${braced('RLVR_NNODES:-1')}" \\`,
    ...overrides.map(([k, v]) => `  ${shellArg(`${k}=${value(v)}`)} \\`),
    '  "$@"',
    '',
  ];
  return E.right(lines.join('\n'));
}
