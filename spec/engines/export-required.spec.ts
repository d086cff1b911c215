import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PRIME_RL_COMMIT, VERL_COMMIT } from '../../src/cli/export-config.js';
import { OBJECTIVE_NAMES } from '../../src/objectives/registry.js';
import { at, exportOf, readToml, runVerlScript, verlOverrides } from './helpers/engine-files.js';

/**
 * Issue 38 item 2: exported engine runs that start. What each engine's pinned source requires of a config,
 * written here from reading that source (file and line at the pinned commit in each row), and every exported
 * configuration checked against it: the verl script (run by bash, python3 stubbed) sets each required key and
 * satisfies each check; prime-rl's TOML parses with tomllib, holds the required fields, and writes only keys its
 * config models have (they refuse unknown keys).
 */

// verl b178a3cd56f58b2d502255daba591e92833930a7 (v0.7.0-125, 2026-01-29).
const VERL_REQUIRED: readonly (readonly [key: string, when: string, source: string])[] = [
  // verl/workers/config/rollout.py:139 `name: Optional[str] = MISSING`; trainer/config/rollout/rollout.yaml:5 `name: ???`
  ['actor_rollout_ref.rollout.name', 'always', 'rollout.py:139'],
  // verl/workers/config/actor.py:186-189 (ActorConfig.__post_init__): without use_dynamic_bsz, one of
  // ppo_micro_batch_size / ppo_micro_batch_size_per_gpu
  ['actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu', 'always', 'actor.py:186'],
  // verl/utils/config.py:164-168 (validate_config): the rollout's log_prob_micro_batch_size(_per_gpu)
  ['actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu', 'always', 'utils/config.py:164'],
  // verl/utils/config.py:155-161: the reference's, when a reference policy is used (use_kl_loss,
  // trainer/ppo/utils.py:76 need_reference_policy)
  ['actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu', 'use_kl_loss', 'utils/config.py:157'],
  // Not MISSING in the yaml, but their defaults name files of verl's examples: ~/models/deepseek-llm-7b-chat,
  // ~/data/rlhf/gsm8k/*.parquet (trainer/config/_generated_ppo_trainer.yaml)
  ['actor_rollout_ref.model.path', 'always', '_generated_ppo_trainer.yaml'],
  ['data.train_files', 'always', 'data/legacy_data.yaml:11'],
  ['data.val_files', 'always', 'data/legacy_data.yaml:14'],
  // trainer.n_gpus_per_node defaults to 8 (_generated_ppo_trainer.yaml:604) and rollout tensor parallelism to 2
  // (:206): a run on fewer GPUs must set them
  ['trainer.n_gpus_per_node', 'always', '_generated_ppo_trainer.yaml:604'],
  ['actor_rollout_ref.rollout.tensor_model_parallel_size', 'always', '_generated_ppo_trainer.yaml:206'],
  // trainer.logger defaults to [console, wandb] (:597), and wandb needs an account
  ['trainer.logger', 'always', '_generated_ppo_trainer.yaml:597'],
  // docs/advance/ppo_lora.rst "Required configurations for LoRA": lora_rank, lora_alpha, target_modules,
  // rollout.load_format=safetensors (lora_alpha and target_modules unless an adapter is loaded)
  ['actor_rollout_ref.model.lora_rank', 'lora', 'ppo_lora.rst:35'],
  ['actor_rollout_ref.rollout.load_format', 'lora', 'ppo_lora.rst:37'],
];

/** verl's checks on the values (each a condition at the pinned commit that refuses the run when false). */
function verlChecks(o: Map<string, string>): string[] {
  const n = (key: string): number => Number(o.get(key));
  const failed: string[] = [];
  const check = (ok: boolean, what: string): void => {
    if (!ok) failed.push(what);
  };
  // actor.py:191-198 valid_loss_agg_modes
  check(
    ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'].includes(
      o.get('actor_rollout_ref.actor.loss_agg_mode') ?? 'token-mean',
    ),
    'loss_agg_mode',
  );
  // actor.py:203 train_batch_size >= ppo_mini_batch_size
  check(n('data.train_batch_size') >= n('actor_rollout_ref.actor.ppo_mini_batch_size'), 'ppo_mini_batch_size');
  // fsdp_workers.py:241-259 on one GPU: mini-batch * n divisible by the micro-batch
  check(
    (n('actor_rollout_ref.actor.ppo_mini_batch_size') * n('actor_rollout_ref.rollout.n')) %
      n('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu') ===
      0,
    'micro-batch divides the mini-batch',
  );
  // optimizer.py:112 lr_scheduler_type in constant, cosine
  check(['constant', 'cosine'].includes(o.get('actor_rollout_ref.actor.optim.lr_scheduler_type')!), 'scheduler');
  // workers/config/model.py:121-122, converted by fsdp_workers.py:618 (OmegaConf refuses a float or a list)
  if (o.has('actor_rollout_ref.model.lora_alpha'))
    check(/^\d+$/.test(o.get('actor_rollout_ref.model.lora_alpha')!), 'lora_alpha is an integer');
  if (o.has('actor_rollout_ref.model.target_modules'))
    check(!o.get('actor_rollout_ref.model.target_modules')!.startsWith('['), 'target_modules is a string');
  // utils/config.py:197 rollout temperature > 0
  check(n('actor_rollout_ref.rollout.temperature') > 0, 'temperature');
  return failed;
}

const dir = mkdtempSync(join(tmpdir(), 'rlvr-export-required-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const adapter = join(dir, 'adapter');
mkdirSync(adapter);
writeFileSync(
  join(adapter, 'adapter_config.json'),
  JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: ['q_proj'] }),
);

const VERL_CASES: string[][] = [
  ...OBJECTIVE_NAMES.map((name) => ['--objective', name]),
  ['--objective', 'grpo', '--beta', '0.04'],
  ['--objective', 'grpo', '--advantage', 'rcc'],
  ['--objective', 'conspo', '--num-generations', '6', '--prompts-per-step', '3'],
  ['--lora-r', '16', '--lora-alpha', '32'],
  ['--lora-r', '4', '--lora-target-modules', 'q_proj,v_proj'],
  ['--adapter', adapter],
  ['--groups-per-minibatch', '4', '--prompts-per-step', '8'],
];

describe(`verl ${VERL_COMMIT.slice(0, 8)}: the script sets what verl requires`, () => {
  for (const argv of VERL_CASES)
    it(argv.join(' '), async () => {
      const r = runVerlScript(await exportOf(['--engine', 'verl', '--model', '/models/base', ...argv]));
      expect(r.status, r.stderr).toBe(0);
      const o = verlOverrides(r);
      const lora = o.has('actor_rollout_ref.model.lora_rank');
      for (const [key, when, source] of VERL_REQUIRED) {
        const applies =
          when === 'always' ||
          (when === 'lora' && lora) ||
          (when === 'use_kl_loss' && o.get(`actor_rollout_ref.actor.use_kl_loss`) === 'true');
        if (applies) expect(o.has(key), `${key} (${source})`).toBe(true);
      }
      expect(verlChecks(o)).toEqual([]);
    });

  it('the contrastive objectives keep each group whole in one micro-batch (all three micro-batches one group)', async () => {
    const o = verlOverrides(
      runVerlScript(
        await exportOf(['--engine', 'verl', '--model', '/m', '--objective', 'conspo', '--num-generations', '6']),
      ),
    );
    expect(o.get('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu')).toBe('6');
    expect(o.get('actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu')).toBe('6');
    expect(o.get('actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu')).toBe('6');
    expect(o.get('trainer.balance_batch')).toBe('false');
  });

  it('refuses what verl types otherwise: a fractional --lora-alpha (an int field)', async () => {
    await expect(
      exportOf(['--engine', 'verl', '--model', '/m', '--lora-r', '4', '--lora-alpha', '2.5']),
    ).rejects.toThrow(/--lora-alpha 2\.5: verl's lora_alpha is an integer/);
  });
});

// prime-rl 559b44772e471d1538537b8805cc77f3824a5e64 (v0.8.1.dev67), packages/prime-rl-configs/src/prime_rl/configs/.
// The fields without a default (pydantic requires them) on the path an RL config takes:
const PRIME_RL_REQUIRED: readonly (readonly [path: string, source: string])[] = [
  ['trainer', 'rl.py:230 RLConfig.trainer: TrainerConfig'],
  ['orchestrator', 'rl.py:232 RLConfig.orchestrator: OrchestratorConfig'],
  ['trainer.loss.import_path', 'trainer.py:525 CustomLossConfig.import_path: str'],
];

/**
 * The keys each table may hold (their config models forbid others; configuration.md: an unknown key fails),
 * for the tables the exporter writes, read from the same files.
 */
const PRIME_RL_KEYS: Readonly<Record<string, readonly string[]>> = {
  '': ['trainer', 'orchestrator', 'inference', 'model', 'ckpt', 'max_steps'], // rl.py:229-299
  model: ['name'], // rl.py:123 SharedModelConfig
  ckpt: ['interval'], // rl.py:109 SharedCheckpointConfig
  inference: [], // inference.py:437 InferenceConfig (defaults)
  trainer: ['loss', 'optim', 'scheduler', 'model'], // trainer.py:597 TrainerConfig
  'trainer.loss': ['type', 'import_path', 'kwargs'], // trainer.py:522 CustomLossConfig
  'trainer.optim': ['type', 'lr', 'weight_decay', 'max_norm'], // trainer.py:415, 436 AdamWConfig
  'trainer.scheduler': ['type', 'warmup_steps', 'min_lr'], // trainer.py:378 CosineSchedulerConfig
  'trainer.model': ['ac', 'lora'], // trainer.py:178 ModelConfig
  'trainer.model.ac': ['freq'], // trainer.py:31 ActivationCheckpointConfig
  'trainer.model.lora': ['rank', 'alpha', 'dropout', 'target_modules'], // trainer.py:103 LoRAConfig
  orchestrator: ['renderer', 'train', 'batch_size', 'group_size'], // orchestrator.py:447 OrchestratorConfig
  'orchestrator.renderer': ['name'],
  'orchestrator.train': ['sampling'], // orchestrator.py:263 TrainConfig
  'orchestrator.train.sampling': ['temperature', 'max_completion_tokens', 'extra_body'], // orchestrator.py:46
};

/** Tables whose keys are free (a dict field): the loss's kwargs, the request's extra body. */
const FREE = ['trainer.loss.kwargs', 'orchestrator.train.sampling.extra_body'];

function unknownKeys(t: Record<string, unknown>, path = ''): string[] {
  if (FREE.includes(path)) return [];
  const allowed = PRIME_RL_KEYS[path];
  if (allowed === undefined) return [`${path} (a table the exporter does not know)`];
  return Object.entries(t).flatMap(([k, v]) => {
    const p = path === '' ? k : `${path}.${k}`;
    if (!allowed.includes(k)) return [p];
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? unknownKeys(v as Record<string, unknown>, p) : [];
  });
}

const PRIME_CASES: string[][] = [
  ...['grpo', 'dr_grpo', 'gspo', 'cispo', 'sapo'].map((name) => ['--objective', name]),
  ['--lora-r', '8', '--lora-dropout', '0.05', '--top-p', '0.9', '--gradient-checkpointing', '--checkpoint-every', '5'],
  ['--eval-every', '10'],
];

describe(`prime-rl ${PRIME_RL_COMMIT.slice(0, 8)}: the TOML parses with the required fields and known keys only`, () => {
  for (const argv of PRIME_CASES)
    it(argv.join(' '), async () => {
      const base = [
        '--engine',
        'prime-rl',
        '--model',
        '/models/base',
        '--loss-type',
        'dapo',
        '--scale-rewards',
        'none',
      ];
      const toml = readToml(await exportOf([...base, ...argv]));
      for (const [path, source] of PRIME_RL_REQUIRED) expect(at(toml, path), `${path} (${source})`).toBeDefined();
      expect(unknownKeys(toml)).toEqual([]);
      // orchestrator.py:630: the batch is whole groups; :47 temperature <= 2.
      expect((at(toml, 'orchestrator.batch_size') as number) % (at(toml, 'orchestrator.group_size') as number)).toBe(0);
      // orchestrator.py:585 validate_renderer_auto_resolves: a local model directory needs a named renderer.
      expect(at(toml, 'orchestrator.renderer.name')).toBe('default');
      // orchestrator.py:342: an [orchestrator.eval] without a source is refused; none is written.
      expect(at(toml, 'orchestrator.eval')).toBeUndefined();
    });
});
