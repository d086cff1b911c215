import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { afterAll, describe, expect, it } from 'vitest';
import { parseExportArgs } from '../../src/cli/args.js';
import {
  ENGINES,
  type Engine,
  ExportRefusedError,
  exportConfig,
  PRIME_RL_OBJECTIVES,
  primeRlImportPath,
  resolveExport,
  verlLossName,
} from '../../src/cli/export-config.js';
import { makeObjective, OBJECTIVE_NAMES } from '../../src/objectives/registry.js';
import { RCC_ADVANTAGES } from '../../src/objectives/rcc.js';
import type { TrainConfig } from '../../src/training/config.js';
import { train } from '../../src/training/trainer.js';
import { tinyRun } from '../training/helpers/tiny-run.js';
import { tinyHubDir } from '../hf/tiny-hub.js';
import { at, readToml, runVerlScript, verlOverrides } from './helpers/engine-files.js';

/**
 * `rlvr export-config`: each objective maps to the loss the Python package registers (read from its source, not
 * from the exporter), a setting without an equivalent is refused naming its flag, and what is printed parses
 * (bash -n for verl's script, a TOML reader for prime-rl's file) with the run's values in the engine's keys.
 */

const TARGET = { modelPath: '/runs/r1/model', source: 'test' };
const PY = 'python/rlvr_objectives';

function cfgOf(argv: string[]): TrainConfig {
  const r = parseExportArgs(['--engine', 'verl', ...argv]);
  if (E.isLeft(r)) throw r.left;
  return r.right.cfg;
}

function exported(engine: Engine, argv: string[]): string {
  const r = exportConfig(engine, cfgOf(argv), TARGET);
  if (E.isLeft(r)) throw r.left;
  return r.right;
}

function refused(engine: Engine, argv: string[]): ExportRefusedError {
  const r = exportConfig(engine, cfgOf(argv), TARGET);
  if (E.isRight(r)) throw new Error(`accepted: ${argv.join(' ')}`);
  expect(r.left).toBeInstanceOf(ExportRefusedError);
  expect(r.left.message.split('\n')).toHaveLength(1);
  return r.left;
}

/** verl's overrides as verl receives them (the script run, python3 stubbed), and the environment it sets. */
function verlParts(script: string): { overrides: Map<string, string>; run: Record<string, unknown>; modules: string } {
  const r = runVerlScript(script);
  expect(r.status, r.stderr).toBe(0);
  const env = r.env!;
  return {
    overrides: verlOverrides(r),
    run: JSON.parse(env.RLVR_OBJECTIVE_CONFIG!) as Record<string, unknown>,
    modules: env.VERL_USE_EXTERNAL_MODULES!,
  };
}

type TomlTable = Record<string, unknown>;
/** The TOML as Python's tomllib reads it. */
const parseToml = (text: string): TomlTable => readToml(text);

describe('each objective maps to the loss name the Python package registers', () => {
  const losses = readFileSync(`${PY}/losses.py`, 'utf8');
  const block = /^LOSSES = \{([\s\S]*?)^\}/m.exec(losses)![1]!;
  const pythonObjectives = [...block.matchAll(/^ {4}"([a-z_]+)": [a-z_]+,$/gm)].map((m) => m[1]!);
  const plugin = readFileSync(`${PY}/verl_plugin.py`, 'utf8');
  const prime = readFileSync(`${PY}/prime_rl.py`, 'utf8');

  it('the Python package states every objective of the registry, and verl_plugin names them rlvr_<name>', () => {
    expect([...pythonObjectives].sort()).toEqual([...OBJECTIVE_NAMES].sort());
    expect(plugin).toContain('LOSS_NAMES = {name: "rlvr_" + name for name in LOSSES}');
  });

  it('verl: the script selects that loss for every objective, and the estimator its kind needs', () => {
    for (const name of OBJECTIVE_NAMES) {
      const { overrides, run } = verlParts(exported('verl', ['--objective', name]));
      expect(overrides.get('actor_rollout_ref.actor.policy_loss.loss_mode')).toBe(verlLossName(name));
      expect(verlLossName(name)).toBe(`rlvr_${name}`);
      expect(pythonObjectives).toContain(name);
      const contrastive = name === 'disco' || name === 'conspo';
      expect(overrides.get('algorithm.adv_estimator')).toBe(contrastive ? 'rlvr_contrast' : 'rlvr_group');
      expect(plugin).toContain(`"${overrides.get('algorithm.adv_estimator')}": compute_`);
      expect(run.objective).toBe(name);
    }
  });

  it('prime-rl: the carried objectives import the function prime_rl.py defines; the others are refused', () => {
    const carried = /^CARRIED = \(([^)]*)\)/m
      .exec(prime)![1]!
      .split(',')
      .map((s) => s.trim().replace(/"/g, ''))
      .filter(Boolean);
    expect([...carried].sort()).toEqual([...PRIME_RL_OBJECTIVES].sort());
    for (const name of OBJECTIVE_NAMES) {
      const argv = ['--objective', name, '--loss-type', 'dapo', '--scale-rewards', 'none'];
      if (!carried.includes(name)) {
        expect(refused('prime-rl', ['--objective', name]).flag).toBe('--objective');
        continue;
      }
      let cfg = cfgOf(argv);
      if (name === 'dapo') {
        // DAPO's dynamic sampling (on by default, no flag) needs the group: refused; a run without it exports.
        expect(refused('prime-rl', argv).flag).toBe('objective option dynamicSampling');
        cfg = { ...cfg, objectiveOptions: { ...cfg.objectiveOptions, dynamicSampling: false } };
      }
      const out = exportConfig('prime-rl', cfg, TARGET);
      if (E.isLeft(out)) throw out.left;
      const toml = parseToml(out.right);
      const path = at(toml, 'trainer.loss.import_path') as string;
      expect(path).toBe(primeRlImportPath(name));
      expect(prime).toMatch(new RegExp(`^def ${path.split('.').pop()}\\(inputs, \\*\\*kwargs\\):$`, 'm'));
    }
  });
});

describe('refused options name the flag', () => {
  const cases: [Engine, string[], string][] = [
    ['verl', ['--bicc'], '--bicc'],
    ['verl', ['--objective', 'grpo', '--loss-type', 'bnpo'], '--loss-type'],
    ['verl', ['--model', '/m', '--lora-dropout', '0.1'], '--lora-dropout'],
    ['verl', ['--model', '/m', '--lora-r', '4', '--use-rslora'], '--use-rslora'],
    ['verl', ['--objective', 'conspo', '--advantage', 'rcc'], '--advantage'],
    ['verl', ['--objective', 'conspo', '--tau', '-1'], '--tau'],
    ['prime-rl', ['--objective', 'grpo', '--loss-type', 'dapo', '--scale-rewards', 'none', '--beta', '0.04'], '--beta'],
    ['prime-rl', ['--objective', 'grpo', '--scale-rewards', 'none'], '--loss-type'],
    ['prime-rl', ['--objective', 'grpo', '--loss-type', 'dapo'], '--scale-rewards'],
    ['prime-rl', ['--objective', 'dapo', '--scale-rewards', 'none'], 'objective option dynamicSampling'],
    ['prime-rl', ['--objective', 'gmpo'], '--objective'],
    ['prime-rl', ['--objective', 'grpo', '--advantage', 'rcc'], '--advantage'],
    ['prime-rl', ['--objective', 'cispo', '--scale-rewards', 'none', '--num-iterations', '2'], '--num-iterations'],
    ['prime-rl', ['--objective', 'cispo', '--scale-rewards', 'none', '--temperature', '2.5'], '--temperature'],
    ['prime-rl', ['--bicc'], '--bicc'],
  ];
  for (const [engine, argv, flag] of cases)
    it(`${engine}: ${argv.join(' ')} -> ${flag}`, () => {
      const e = refused(engine, argv);
      expect(e.flag).toBe(flag);
      expect(e.message).toContain(`--engine ${engine}: ${flag}`);
    });
});

describe('the output parses, with the run in the engine keys', () => {
  it('verl: bash -n accepts the script; the settings are in verl keys; the options travel in the environment', () => {
    const argv = ['--objective', 'dr_grpo', '--num-generations', '4', '--prompts-per-step', '6', '--epsilon', '0.1'];
    const script = exported('verl', [...argv, '--beta', '0.04', '--learning-rate', '3e-6', '--steps', '40']);
    const bash = spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' });
    expect(bash.status, bash.stderr).toBe(0);
    const { overrides: o, run, modules } = verlParts(script);
    expect(modules).toBe('rlvr_objectives.verl_plugin');
    expect(o.get('actor_rollout_ref.rollout.n')).toBe('4');
    expect(o.get('data.train_batch_size')).toBe('6');
    expect(o.get('actor_rollout_ref.actor.clip_ratio_low')).toBe('0.1');
    expect(o.get('actor_rollout_ref.actor.clip_ratio_high')).toBe('0.1'); // follows epsilon, as TRL
    expect(o.get('actor_rollout_ref.actor.clip_ratio_c')).toBe('inf'); // no dual clip (verl's default is 3.0)
    expect(o.get('actor_rollout_ref.actor.loss_agg_mode')).toBe('seq-mean-token-sum-norm');
    expect(o.get('actor_rollout_ref.actor.loss_scale_factor')).toBe('8'); // the max completion length
    expect(o.get('actor_rollout_ref.actor.use_kl_loss')).toBe('true');
    expect(o.get('actor_rollout_ref.actor.kl_loss_coef')).toBe('0.04');
    expect(o.get('actor_rollout_ref.actor.kl_loss_type')).toBe('low_var_kl');
    expect(o.get('actor_rollout_ref.actor.optim.lr')).toBe('0.000003');
    expect(o.get('trainer.total_training_steps')).toBe('40');
    expect(o.get('actor_rollout_ref.model.path')).toBe(TARGET.modelPath);
    // The options the objective's parser returns, beta 0 (verl adds the KL itself), parse back to themselves.
    const parsed = makeObjective('dr_grpo', { epsilon: 0.1, beta: 0.04 });
    if (E.isLeft(parsed)) throw parsed.left;
    expect(run.options).toEqual({ ...parsed.right.config, beta: 0 });
    expect(E.isRight(makeObjective('dr_grpo', run.options as Record<string, unknown>))).toBe(true);
    expect(run.totalSteps).toBe(40);
  });

  it("verl: the dual clip is verl's clip_ratio_c, the number or inf for none; the options say the same", () => {
    for (const objective of ['grpo', 'dapo', 'dr_grpo']) {
      for (const dualClip of [3, 1.5, null]) {
        const cfg = cfgOf(['--objective', objective]);
        const r = exportConfig('verl', { ...cfg, objectiveOptions: { ...cfg.objectiveOptions, dualClip } }, TARGET);
        if (E.isLeft(r)) throw r.left;
        const { overrides: o, run } = verlParts(r.right);
        expect(o.get('actor_rollout_ref.actor.clip_ratio_c')).toBe(dualClip === null ? 'inf' : String(dualClip));
        expect((run.options as Record<string, unknown>).dualClip).toBe(dualClip);
      }
    }
    for (const objective of ['gspo', 'gmpo', 'cispo', 'sapo', 'disco', 'conspo'])
      expect(
        verlParts(exported('verl', ['--objective', objective])).overrides.has('actor_rollout_ref.actor.clip_ratio_c'),
      ).toBe(false);
  });

  it('verl: RCC loads verl_rcc, keeps a reference, and carries the delta mode; ConSPO keeps groups whole', () => {
    const {
      overrides: o,
      run,
      modules,
    } = verlParts(exported('verl', ['--objective', 'grpo', '--advantage', 'rcc', '--rcc-delta', 'mean']));
    expect(modules).toBe('rlvr_objectives.verl_plugin,rlvr_objectives.verl_rcc');
    expect(o.get('algorithm.adv_estimator')).toBe('rlvr_rcc');
    expect(o.get('actor_rollout_ref.actor.use_kl_loss')).toBe('true');
    expect(o.get('actor_rollout_ref.actor.kl_loss_coef')).toBe('0');
    expect(run.rcc).toEqual({ ...RCC_ADVANTAGES, deltaMode: 'mean' });
    const c = verlParts(exported('verl', ['--objective', 'conspo', '--num-generations', '6'])).overrides;
    expect(c.get('trainer.balance_batch')).toBe('false');
    expect(c.get('actor_rollout_ref.actor.use_dynamic_bsz')).toBe('false');
    expect(c.get('actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu')).toBe('6');
  });

  it('prime-rl: the TOML reads back with the run in prime-rl keys and the options as the loss kwargs', () => {
    const argv = ['--objective', 'sapo', '--loss-type', 'dapo', '--scale-rewards', 'none', '--top-p', '0.9'];
    const toml = parseToml(
      exported('prime-rl', [...argv, '--num-generations', '4', '--eval-every', '10', '--warmup-steps', '5']),
    );
    expect(at(toml, 'model.name')).toBe(TARGET.modelPath);
    expect(at(toml, 'trainer.loss.type')).toBe('custom');
    expect(at(toml, 'orchestrator.batch_size')).toBe(16 * 4);
    expect(at(toml, 'orchestrator.group_size')).toBe(4);
    expect(at(toml, 'orchestrator.train.sampling.max_completion_tokens')).toBe(8);
    expect(at(toml, 'orchestrator.train.sampling.extra_body.top_p')).toBe(0.9);
    // An [orchestrator.eval] needs an environment source the exporter cannot name: listed as not carried.
    expect(at(toml, 'orchestrator.eval')).toBeUndefined();
    expect(exported('prime-rl', [...argv, '--eval-every', '10'])).toMatch(/^# not carried: .*--eval-every/m);
    expect(at(toml, 'trainer.scheduler.warmup_steps')).toBe(5);
    const parsed = makeObjective('sapo', { lossType: 'dapo', scaleRewards: 'none' });
    if (E.isLeft(parsed)) throw parsed.left;
    const kwargs = at(toml, 'trainer.loss.kwargs') as Record<string, unknown>;
    const expected = Object.fromEntries(
      Object.entries(parsed.right.config).filter(([k, v]) => v !== null && k !== 'numGenerations'),
    );
    expect(kwargs).toEqual(expected);
  });

  it('every objective gives verl a script bash accepts (with defaults)', () => {
    for (const name of OBJECTIVE_NAMES) {
      const bash = spawnSync('bash', ['-n'], { input: exported('verl', ['--objective', name]), encoding: 'utf8' });
      expect(bash.status, `${name}: ${bash.stderr}`).toBe(0);
    }
  });
});

describe('--run DIR: the objective from the run, the model from DIR/model', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rlvr-export-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const identity = {
    task: 'addition',
    digits: null,
    dataset: null,
    objective: 'gspo',
    objectiveConfig: { epsilon: 0.001, epsilonHigh: 0.002, lossType: 'dapo', scaleRewards: 'none' },
    advantage: 'group',
    rccDelta: 'sum',
    bicc: false,
  };
  const writeRun = (run: string, id: object): void => {
    mkdirSync(join(run, 'checkpoint'), { recursive: true });
    mkdirSync(join(run, 'model'), { recursive: true });
    const trainerState = {
      phase: 'rl',
      step: 7,
      warmStartEval: { passAt1: 0.5, avgAtK: 0.5, passAtK: 0.75, k: 4, prompts: 8 },
      finalEval: null,
      identity: id,
      metricsBytes: 0,
    };
    writeFileSync(
      join(run, 'checkpoint', 'trainer_state.json'),
      JSON.stringify({ format: 'rlvr-wgpu/1', trainerState }),
    );
  };

  it('reads the recorded objective and options, and points the engine at DIR/model', async () => {
    const run = join(dir, 'ok');
    writeRun(run, identity);
    const args = parseExportArgs(['--engine', 'prime-rl', '--run', run, '--steps', '9']);
    if (E.isLeft(args)) throw args.left;
    const r = await resolveExport(args.right);
    if (E.isLeft(r)) throw r.left;
    expect(r.right.cfg.objective).toBe('gspo');
    expect(r.right.target.modelPath).toBe(join(run, 'model'));
    expect(r.right.target.source).toContain('rl step 7');
    const out = exportConfig('prime-rl', r.right.cfg, r.right.target);
    if (E.isLeft(out)) throw out.left;
    const toml = parseToml(out.right);
    expect(at(toml, 'max_steps')).toBe(9);
    expect(at(toml, 'trainer.loss.import_path')).toBe('rlvr_objectives.prime_rl.gspo_loss');
    expect(at(toml, 'trainer.loss.kwargs.epsilon')).toBe(0.001);
  });

  it("reads what a real run's checkpoint records (a tiny trainer run)", async () => {
    const run = join(dir, 'trained');
    const objectiveOptions = { epsilonMax: 3, lossType: 'dapo', scaleRewards: 'none' };
    const modelDir = await tinyHubDir();
    const cfg = { objective: 'cispo' as const, objectiveOptions, outputDir: run, threads: 1, modelDir };
    const result = await train(tinyRun({ ...cfg, warmStartSteps: 0, maxCompletionLength: 4 }));
    result.backend?.dispose();
    const args = parseExportArgs(['--engine', 'verl', '--run', run]);
    if (E.isLeft(args)) throw args.left;
    const r = await resolveExport(args.right);
    if (E.isLeft(r)) throw r.left;
    expect(r.right.cfg.objective).toBe('cispo');
    expect(r.right.target.source).toContain('rl step 3');
    const out = exportConfig('verl', r.right.cfg, r.right.target);
    if (E.isLeft(out)) throw out.left;
    const { overrides, run: env } = verlParts(out.right);
    expect(overrides.get('actor_rollout_ref.actor.policy_loss.loss_mode')).toBe('rlvr_cispo');
    expect(overrides.get('actor_rollout_ref.actor.loss_agg_mode')).toBe('token-mean');
    const parsed = makeObjective('cispo', objectiveOptions);
    if (E.isLeft(parsed)) throw parsed.left;
    expect(env.options).toEqual(parsed.right.config);
  });

  it('refuses a flag the run records, a directory without a checkpoint, and a damaged state', async () => {
    const clash = parseExportArgs(['--engine', 'verl', '--run', dir, '--objective', 'grpo']);
    expect(E.isLeft(clash) && clash.left.field).toBe('--objective');
    const none = parseExportArgs(['--engine', 'verl', '--run', join(dir, 'nothing')]);
    if (E.isLeft(none)) throw none.left;
    const missing = await resolveExport(none.right);
    expect(E.isLeft(missing) && missing.left.message).toMatch(/--run .* has no checkpoint/);
    const bad = join(dir, 'bad');
    writeRun(bad, { ...identity, objective: 'nope' });
    const args = parseExportArgs(['--engine', 'verl', '--run', bad]);
    if (E.isLeft(args)) throw args.left;
    const damaged = await resolveExport(args.right);
    expect(E.isLeft(damaged) && damaged.left.message).toMatch(/trainerState\.identity\.objective/);
  });

  it('--engine is required and checked', () => {
    for (const [argv, why] of [
      [[], /--engine .*required/],
      [['--engine', 'ray'], /must be one of verl, prime-rl/],
      [['--engine'], /--engine .*needs a value/],
    ] as const) {
      const r = parseExportArgs(argv);
      expect(E.isLeft(r) && r.left.message).toMatch(why);
    }
    expect(ENGINES).toEqual(['verl', 'prime-rl']);
  });
});
