import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { tinyRun } from '../training/helpers/tiny-run.js';
import { at, exportOf, readToml, runVerlScript, verlOverrides } from './helpers/engine-files.js';

/**
 * Issue 38 item 2: `export-config --run DIR` carried only the objective (a run with 4 generations exported
 * rollout.n=8), exported a merged LoRA run as full fine-tuning and refused an unmerged one for a wrong reason.
 * Runs record every setting in their checkpoint; from real tiny runs on a Hub model, the export carries the
 * group size, batch, lengths, steps and schedule, and LoRA as verl's lora_rank / lora_alpha / target_modules,
 * merged (fresh adapters on DIR/model) or not (the base with DIR/adapter), refusing only what the engine cannot do.
 */

const dir = mkdtempSync(join(tmpdir(), 'rlvr-export-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Settings unlike every default, so that a default exported in their place shows. */
const RUN: Partial<T.TrainConfig> = {
  objective: 'grpo',
  objectiveOptions: { lossType: 'dapo', scaleRewards: 'none', epsilon: 0.15 },
  steps: 2,
  promptsPerStep: 2,
  numGenerations: 4,
  maxCompletionLength: 4,
  learningRate: 3e-3,
  warmupSteps: 1,
  weightDecay: 0.05,
  maxGradNorm: 0.7,
  temperature: 0.9,
  topP: 0.95,
  warmStartSteps: 0,
  evalPrompts: 2,
  evalK: 1,
  seed: 11,
};
const LORA: T.LoraConfig = { r: 2, alpha: 4, dropout: 0, targetModules: ['q_proj', 'v_proj'], useRslora: false };

let model = '';
const out = (name: string): string => join(dir, name);
beforeAll(async () => {
  model = await tinyHubDir();
  for (const [name, over] of [
    ['full', {}],
    ['merged', { lora: LORA, mergeLora: true }],
    ['unmerged', { lora: LORA }],
  ] as const) {
    const r = await T.train(tinyRun({ ...RUN, ...over, modelDir: model, outputDir: out(name) }));
    r.backend?.dispose();
  }
}, 120_000);

const verl = async (argv: string[]): Promise<Map<string, string>> => {
  const r = runVerlScript(await exportOf(['--engine', 'verl', ...argv]));
  expect(r.status, r.stderr).toBe(0);
  return verlOverrides(r);
};

describe('--run DIR carries every setting the run recorded', () => {
  it('verl, a full fine-tune: generations, batch, lengths, steps, schedule, sampling, from DIR/model', async () => {
    const o = await verl(['--run', out('full')]);
    const expected: Record<string, string> = {
      'actor_rollout_ref.rollout.n': '4',
      'data.train_batch_size': '2',
      'data.max_response_length': '4',
      'trainer.total_training_steps': '2',
      'actor_rollout_ref.actor.optim.lr': '0.003',
      'actor_rollout_ref.actor.optim.lr_warmup_steps': '1',
      'actor_rollout_ref.actor.optim.weight_decay': '0.05',
      'actor_rollout_ref.actor.grad_clip': '0.7',
      'actor_rollout_ref.rollout.temperature': '0.9',
      'actor_rollout_ref.rollout.top_p': '0.95',
      'actor_rollout_ref.actor.clip_ratio_low': '0.15',
      'data.seed': '11',
      'actor_rollout_ref.model.path': join(out('full'), 'model'),
    };
    for (const [key, value] of Object.entries(expected)) expect(o.get(key), key).toBe(value);
    expect(o.has('actor_rollout_ref.model.lora_rank')).toBe(false);
  });

  it('prime-rl, a full fine-tune: the same settings in its keys', async () => {
    const toml = readToml(await exportOf(['--engine', 'prime-rl', '--run', out('full')]));
    expect(at(toml, 'orchestrator.group_size')).toBe(4);
    expect(at(toml, 'orchestrator.batch_size')).toBe(8);
    expect(at(toml, 'orchestrator.train.sampling.max_completion_tokens')).toBe(4);
    expect(at(toml, 'orchestrator.train.sampling.temperature')).toBe(0.9);
    expect(at(toml, 'max_steps')).toBe(2);
    expect(at(toml, 'trainer.optim.lr')).toBe(0.003);
    expect(at(toml, 'trainer.scheduler.warmup_steps')).toBe(1);
    expect(at(toml, 'trainer.loss.kwargs.epsilon')).toBe(0.15);
    expect(at(toml, 'model.name')).toBe(join(out('full'), 'model'));
  });

  it('a flag given replaces the recorded setting (more steps), and one saying what the run is is refused', async () => {
    expect((await verl(['--run', out('full'), '--steps', '9'])).get('trainer.total_training_steps')).toBe('9');
    await expect(exportOf(['--engine', 'verl', '--run', out('full'), '--lora-r', '4'])).rejects.toThrow(
      /--lora-r .*is read from the run/,
    );
  });

  it('verl, a merged LoRA run: fresh adapters of its rank, alpha and modules on DIR/model', async () => {
    const o = await verl(['--run', out('merged')]);
    expect(o.get('actor_rollout_ref.model.path')).toBe(join(out('merged'), 'model'));
    expect(o.get('actor_rollout_ref.model.lora_rank')).toBe('2');
    expect(o.get('actor_rollout_ref.model.lora_alpha')).toBe('4');
    expect(o.get('actor_rollout_ref.model.target_modules')).toBe('.*[.](q_proj|v_proj)');
    expect(o.has('actor_rollout_ref.model.lora_adapter_path')).toBe(false);
    expect(o.get('actor_rollout_ref.actor.optim.lr')).toBe('0.003');
  });

  it('verl, an unmerged LoRA run: its base with DIR/adapter (it was refused: "has no model/ directory")', async () => {
    const o = await verl(['--run', out('unmerged')]);
    expect(o.get('actor_rollout_ref.model.path')).toBe(resolve(model));
    expect(o.get('actor_rollout_ref.model.lora_adapter_path')).toBe(join(out('unmerged'), 'adapter'));
    expect(o.get('actor_rollout_ref.model.lora_rank')).toBe('2');
    expect(o.get('actor_rollout_ref.rollout.load_format')).toBe('safetensors');
  });

  it('prime-rl: a merged LoRA run as [trainer.model.lora]; an unmerged one refused for what prime-rl lacks', async () => {
    const toml = readToml(await exportOf(['--engine', 'prime-rl', '--run', out('merged')]));
    expect(at(toml, 'trainer.model.lora')).toEqual({
      rank: 2,
      alpha: 4,
      dropout: 0,
      target_modules: ['q_proj', 'v_proj'],
    });
    const refused = exportOf(['--engine', 'prime-rl', '--run', out('unmerged')]);
    await expect(refused).rejects.toThrow(/--run continues a trained adapter .*prime-rl cannot load/);
    await expect(refused).rejects.not.toThrow(/has no model/);
  });

  it('a run from a new model is refused for what it lacks: a Hub model with a tokenizer', async () => {
    const run = out('new');
    const r = await T.train(tinyRun({ outputDir: run, steps: 1 }));
    r.backend?.dispose();
    await expect(exportOf(['--engine', 'verl', '--run', run])).rejects.toThrow(/trained a new model \(no --model\)/);
  });
});
