import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { omegaConfText } from '../../src/cli/engine-text.js';
import { TRAIN_DEFAULTS } from '../../src/training/config.js';
import { exportOf, omegaConfRead, PYTHON, readToml, runVerlScript, verlOverrides } from './helpers/engine-files.js';

/**
 * Issue 35 item 1: a run directory's name ran as code. Every value written into the verl script or prime-rl's
 * TOML is escaped for each language it passes through, comments included: paths with newlines, quotes, `$()`,
 * backticks and control characters go through both writers, the script runs (bash, python3 stubbed) without
 * running any of them and hands verl each path exactly, and the TOML parses (tomllib) with each path exactly and
 * no key the path could have made.
 */

const dir = mkdtempSync(join(tmpdir(), 'rlvr-escape-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Names that are code in bash, keys in TOML, or interpolations in OmegaConf, if written raw. */
const NAMES = [
  'rlrun\ntouch PWNED\nx',
  'it\'s "quoted"',
  '$(touch PWNED)',
  '`touch PWNED`',
  'tab\there\rcr\x1b[31mesc\x7fdel\u2028sep',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: an OmegaConf interpolation, the text under test
  '${oc.env:HOME}',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: an OmegaConf interpolation, the text under test
  'back\\slash\\${x}',
  '; touch PWNED #',
  'x\n[orchestrator]\nbatch_size = 1\nmax_steps = 2',
];

/** A run directory as a finished full fine-tune from --model leaves it: a checkpoint recording it, and model/. */
function writeRun(run: string): void {
  mkdirSync(join(run, 'checkpoint'), { recursive: true });
  mkdirSync(join(run, 'model'), { recursive: true });
  const objectiveOptions = { lossType: 'dapo', scaleRewards: 'none' };
  const settings = { ...TRAIN_DEFAULTS, objectiveOptions, modelDir: '/models/base', outputDir: run, warmStartSteps: 0 };
  const identity = {
    ...{ task: 'addition', digits: [2, 1], dataset: null, objective: 'grpo', advantage: 'group', rccDelta: 'sum' },
    objectiveConfig: objectiveOptions,
    bicc: false,
  };
  const trainerState = {
    ...{ phase: 'rl', step: 3, finalEval: null, identity, metricsBytes: 0, settings },
    warmStartEval: { passAt1: 0.5, avgAtK: 0.5, passAtK: 0.75, k: 4, prompts: 8 },
  };
  writeFileSync(join(run, 'checkpoint', 'trainer_state.json'), JSON.stringify({ format: 'rlvr-wgpu/1', trainerState }));
}

describe('a path that is code, a key or an interpolation if written raw', () => {
  NAMES.forEach((name, i) => {
    const run = join(dir, `${i}-${name}`);
    writeRun(run);
    const model = join(run, 'model');

    it(`verl --run: the script runs none of it and hands verl the path exactly (${JSON.stringify(name)})`, async () => {
      const script = await exportOf(['--engine', 'verl', '--run', run]);
      expect(spawnSync('bash', ['-n'], { input: script, encoding: 'utf8' }).status).toBe(0);
      // No comment line holds a raw control character: each line is a whole comment or code.
      for (const line of script.split('\n').filter((l) => l.startsWith('#')))
        expect(
          [...line].some((c) => c !== '\t' && (c < ' ' || c === '\x7f')),
          line,
        ).toBe(false);
      const r = runVerlScript(script);
      expect(r.status, r.stderr).toBe(0);
      expect(r.files).toEqual([]); // nothing ran in its directory: no PWNED
      expect(verlOverrides(r).get('actor_rollout_ref.model.path')).toBe(model);
    });

    it(`prime-rl --run: the TOML parses with the path exactly and no key it could make (${JSON.stringify(name)})`, async () => {
      const text = await exportOf(['--engine', 'prime-rl', '--run', run]);
      const toml = readToml(text);
      expect((toml.model as Record<string, unknown>).name).toBe(model);
      expect(toml.max_steps).toBe(TRAIN_DEFAULTS.steps);
      expect(Object.keys(toml).sort()).toEqual(['ckpt', 'inference', 'max_steps', 'model', 'orchestrator', 'trainer']);
      expect((toml.orchestrator as Record<string, unknown>).batch_size).toBe(
        TRAIN_DEFAULTS.promptsPerStep * TRAIN_DEFAULTS.numGenerations,
      );
    });
  });

  it('an adapter path and a dataset path travel the same way (verl, without --run)', async () => {
    const adapter = join(dir, 'adapter $(touch PWNED)\n`x`');
    mkdirSync(adapter, { recursive: true });
    writeFileSync(
      join(adapter, 'adapter_config.json'),
      JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: ['q_proj'] }),
    );
    const argv = [
      '--engine',
      'verl',
      '--model',
      join(dir, "m'\n"),
      '--adapter',
      adapter,
      '--dataset',
      '/d\n$(x).jsonl',
    ];
    const r = runVerlScript(await exportOf(argv));
    expect(r.status, r.stderr).toBe(0);
    expect(r.files).toEqual([]);
    const o = verlOverrides(r);
    expect(o.get('actor_rollout_ref.model.lora_adapter_path')).toBe(adapter);
    expect(o.get('actor_rollout_ref.model.path')).toBe(join(dir, "m'\n"));
  });
});

describe("OmegaConf's escape", () => {
  // biome-ignore lint/suspicious/noTemplateCurlyInString: an OmegaConf interpolation, the text under test
  const cases = ['plain', 'a${b}c', 'a\\${b}', 'a\\\\${b}', 'tail\\', '\\', '$', '${', 'x$\\{y', '}${oc.env:X}'];

  it('reads back as the text (the reading written from the OmegaConf grammar, in the spec helper)', () => {
    for (const text of cases) expect(omegaConfRead(omegaConfText(text))).toBe(text);
  });

  it('reads back as the text through OmegaConf itself, where Python has omegaconf', () => {
    const has = spawnSync(PYTHON, ['-c', 'import omegaconf'], { encoding: 'utf8' }).status === 0;
    if (!has) {
      console.log('omegaconf is not installed for Python: the round trip through OmegaConf itself is skipped');
      return;
    }
    const program =
      'import os, json\nfrom omegaconf import OmegaConf\nout = []\n' +
      'for v in json.loads(os.environ["CASES"]):\n' +
      // biome-ignore lint/suspicious/noTemplateCurlyInString: an OmegaConf interpolation, the text under test
      '    os.environ["X"] = v\n    c = OmegaConf.create({"b": "B", "p": "${oc.env:X}"})\n' +
      '    OmegaConf.resolve(c)\n    out.append(c.p)\nprint(json.dumps(out))';
    const r = spawnSync(PYTHON, ['-c', program], {
      encoding: 'utf8',
      env: { ...process.env, CASES: JSON.stringify(cases.map(omegaConfText)) },
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(cases);
  });
});
