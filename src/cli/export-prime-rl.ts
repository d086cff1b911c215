import * as E from 'fp-ts/lib/Either.js';
import type { TrainConfig } from '../training/config.js';
import { commentText, tomlKey, tomlString, unwritable } from './engine-text.js';
import {
  type Checked,
  common,
  type ExportRefusedError,
  type ExportTarget,
  notCarriedLine,
  optionFlag,
  PRIME_RL_COMMIT,
  primeRlImportPath,
  promptsLine,
  refuser,
} from './export-common.js';

/**
 * prime-rl: an RL config file (TOML) with the custom loss. Keys are read from the config models of
 * packages/prime-rl-configs at PRIME_RL_COMMIT (rl.py `RLConfig`, trainer.py, orchestrator.py, inference.py);
 * spec/engines/export-prime-rl-required.spec.ts lists what they require, with their lines.
 */

/** The objectives python/rlvr_objectives/prime_rl.py carries (a per-sequence loss cannot see a group). */
export const PRIME_RL_OBJECTIVES: readonly string[] = ['grpo', 'dapo', 'dr_grpo', 'gspo', 'cispo', 'sapo'];

export function primeRlConfig(cfg: TrainConfig, target: ExportTarget): E.Either<ExportRefusedError, string> {
  return E.chain((checked: Checked) => primeRlToml(cfg, target, checked))(common('prime-rl', cfg, target));
}

/** A TOML value: a finite number, a boolean, a string (escaped), or an array of them. */
function tomlValue(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(', ')}]`;
  return tomlString(String(v));
}

/** The first string inside `v` that no file can hold, and why (see `unwritable`). */
function firstUnwritable(v: unknown): string | null {
  if (typeof v === 'string') return unwritable(v);
  if (Array.isArray(v)) for (const x of v) if (firstUnwritable(x)) return firstUnwritable(x);
  return null;
}

function primeRlToml(cfg: TrainConfig, target: ExportTarget, checked: Checked): E.Either<ExportRefusedError, string> {
  const { objective, options: o, lora } = checked;
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
  if (lora !== null) {
    if (lora.adapter !== null)
      return refuse(
        lora.adapter.flag,
        `continues a trained adapter (${commentText(lora.adapter.path)}), which prime-rl cannot load: its ` +
          '[trainer.model.lora] starts fresh adapters (train with --merge-lora to get a merged model/ to start from)',
      );
    if (lora.config.useRslora)
      return refuse('--use-rslora', 'has no prime-rl key: its LoRA scales by alpha / rank ([trainer.model.lora])');
  }

  const kwargs = Object.entries(o).filter(([k, v]) => v !== null && k !== 'numGenerations');
  const strings: [string, unknown][] = [['the model path', target.modelPath], ...kwargs];
  for (const [what, v] of strings) {
    const why = firstUnwritable(v);
    if (why) return refuse(what, why);
  }
  const l = lora?.config;
  const lines = [
    `# rlvr export-config --engine prime-rl: objective ${cfg.objective}, for prime-rl ${PRIME_RL_COMMIT}.`,
    `# ${commentText(target.source)}`,
    notCarriedLine('prime-rl'),
    promptsLine(cfg),
    "# Needs rlvr_objectives (this repository's python/, pip install ./python) importable by the trainer, and a",
    '# [[orchestrator.train.source]] for the prompts: the taskset id "rlvr-boxed" with data_file = the',
    '# train.parquet rlvr export-data wrote (python/README.md, "prime-rl", shows the table).',
    `max_steps = ${cfg.steps}`,
    '',
    '[model]',
    `name = ${tomlString(target.modelPath)}`,
    '',
    // The rl entrypoint starts vLLM only when [inference] is there (rl.py RLConfig.inference).
    '[inference]',
    '',
    // The model is a local directory, which renderers' MODEL_RENDERER_MAP cannot name: "auto" is refused
    // (orchestrator.py validate_renderer_auto_resolves); "default" renders with the model's chat template.
    '[orchestrator.renderer]',
    'name = "default"',
    '',
    '[trainer.loss]',
    'type = "custom"',
    `import_path = ${tomlString(primeRlImportPath(cfg.objective))}`,
    '',
    '[trainer.loss.kwargs]',
    ...kwargs.map(([k, v]) => `${tomlKey(k)} = ${tomlValue(v)}`),
    '',
    '[trainer.optim]',
    'type = "adamw"',
    `lr = ${tomlValue(cfg.learningRate)}`,
    `weight_decay = ${tomlValue(cfg.weightDecay)}`,
    `max_norm = ${tomlValue(cfg.maxGradNorm)}`,
    '',
    "# The project's schedule: linear warmup, then cosine decay to 0 (src/nn/schedule.ts).",
    '[trainer.scheduler]',
    'type = "cosine"',
    `warmup_steps = ${cfg.warmupSteps}`,
    'min_lr = 0.0',
    '',
    ...(cfg.gradientCheckpointing ? ['[trainer.model.ac]', 'freq = 1', ''] : []),
    ...(l
      ? [
          '[trainer.model.lora]',
          `rank = ${l.r}`,
          `alpha = ${tomlValue(l.alpha)}`,
          `dropout = ${tomlValue(l.dropout)}`,
          `target_modules = ${tomlValue(l.targetModules)}`,
          '',
        ]
      : []),
    '[orchestrator]',
    `batch_size = ${cfg.promptsPerStep * cfg.numGenerations}`,
    `group_size = ${cfg.numGenerations}`,
    '',
    '[orchestrator.train.sampling]',
    `temperature = ${tomlValue(cfg.temperature)}`,
    `max_completion_tokens = ${cfg.maxCompletionLength}`,
    ...(cfg.topP < 1 ? ['', '[orchestrator.train.sampling.extra_body]', `top_p = ${tomlValue(cfg.topP)}`] : []),
    '',
    // An empty [ckpt] saves at the end of training only.
    '[ckpt]',
    ...(cfg.checkpointEvery > 0 ? [`interval = ${cfg.checkpointEvery}`] : []),
    '',
  ];
  return E.right(lines.join('\n'));
}
