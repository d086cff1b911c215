import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type Engine, ExportRefusedError, NOT_CARRIED } from '../../src/cli/export-config.js';
import { TRAIN_FLAGS } from '../../src/cli/train-flags.js';
import { exportOf } from './helpers/engine-files.js';

/**
 * Issue 35 item 5: export-config dropped settings silently (BICC options without --bicc, --task/--digits/--dataset,
 * --seed on prime-rl) and refused --use-rslora on prime-rl naming --lora-r. Every `rlvr train` flag, given a value
 * other than its default, is now exactly one of: refused naming it; listed in the header's "not carried" line
 * (and then the configuration is the same as without it); or carried (the configuration changes).
 */

const dir = mkdtempSync(join(tmpdir(), 'rlvr-export-flags-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const adapter = join(dir, 'adapter');
mkdirSync(adapter);
writeFileSync(
  join(adapter, 'adapter_config.json'),
  JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: ['q_proj', 'v_proj'] }),
);

/** What each engine exports from without the flag (prime-rl carries dapo with unscaled advantages only). */
const BASE: Record<Engine, string[]> = {
  verl: ['--model', '/models/base'],
  'prime-rl': ['--model', '/models/base', '--loss-type', 'dapo', '--scale-rewards', 'none'],
};

/**
 * Each flag's case: the flag with a value other than its default, and flags it needs, given to both sides of the
 * comparison (`with`). A flag missing here fails the spec: a new flag needs a decision in the exporter.
 */
const CASES: Record<string, { readonly argv: string[]; readonly with?: string[] }> = {
  task: { argv: ['--task', 'multiplication'] },
  dataset: { argv: ['--dataset', '/data/problems.jsonl'] },
  objective: { argv: ['--objective', 'cispo'] },
  advantage: { argv: ['--advantage', 'rcc'] },
  'rcc-delta': { argv: ['--rcc-delta', 'mean'] },
  bicc: { argv: ['--bicc'] },
  'bicc-placement': { argv: ['--bicc-placement', 'after-query'] },
  'bicc-ratio': { argv: ['--bicc-ratio', 'conditioned-old'] },
  'bicc-sides': { argv: ['--bicc-sides', 'positives'] },
  'bicc-context-share': { argv: ['--bicc-context-share', '0.5'] },
  model: { argv: ['--model', '/models/other'] },
  'allow-non-finite-weights': { argv: ['--allow-non-finite-weights'] },
  digits: { argv: ['--digits', '3'] },
  backend: { argv: ['--backend', 'reference'] },
  'lora-r': { argv: ['--lora-r', '4'] },
  'lora-alpha': { argv: ['--lora-alpha', '16'] },
  'lora-dropout': { argv: ['--lora-dropout', '0.1'] },
  'lora-target-modules': { argv: ['--lora-target-modules', 'q_proj'] },
  'use-rslora': { argv: ['--use-rslora'] },
  adapter: { argv: ['--adapter', adapter] },
  'merge-lora': { argv: ['--merge-lora'], with: ['--lora-r', '4', '--output', '/runs/o'] },
  'gradient-checkpointing': { argv: ['--gradient-checkpointing'] },
  output: { argv: ['--output', '/runs/o'] },
  resume: { argv: ['--resume', '/runs/o/checkpoint'] },
  overwrite: { argv: ['--overwrite'] },
  'save-dtype': { argv: ['--save-dtype', 'bf16'], with: ['--output', '/runs/o'] },
  'on-non-finite': { argv: ['--on-non-finite', 'skip'] },
  seed: { argv: ['--seed', '5'] },
  threads: { argv: ['--threads', '2'] },
  steps: { argv: ['--steps', '7'] },
  'prompts-per-step': { argv: ['--prompts-per-step', '4'] },
  'num-generations': { argv: ['--num-generations', '4'] },
  temperature: { argv: ['--temperature', '0.9'] },
  'top-p': { argv: ['--top-p', '0.9'] },
  'max-completion-length': { argv: ['--max-completion-length', '16'] },
  'learning-rate': { argv: ['--learning-rate', '1e-5'] },
  'num-iterations': { argv: ['--num-iterations', '2'] },
  'groups-per-minibatch': { argv: ['--groups-per-minibatch', '4'] },
  'warmup-steps': { argv: ['--warmup-steps', '3'] },
  'max-grad-norm': { argv: ['--max-grad-norm', '0.5'] },
  'weight-decay': { argv: ['--weight-decay', '0.1'] },
  'warm-start-steps': { argv: ['--warm-start-steps', '5'] },
  'warm-start-until': { argv: ['--warm-start-until', '0.5'] },
  'warm-start-batch-size': { argv: ['--warm-start-batch-size', '8'] },
  'warm-start-learning-rate': { argv: ['--warm-start-learning-rate', '1e-3'] },
  'warm-start-context-share': { argv: ['--warm-start-context-share', '0.2'] },
  'eval-every': { argv: ['--eval-every', '10'] },
  'eval-prompts': { argv: ['--eval-prompts', '20'] },
  'eval-k': { argv: ['--eval-k', '2'] },
  'checkpoint-every': { argv: ['--checkpoint-every', '5'] },
  'd-model': { argv: ['--d-model', '32'] },
  'n-layers': { argv: ['--n-layers', '3'] },
  'n-heads': { argv: ['--n-heads', '8'] },
  'n-kv-heads': { argv: ['--n-kv-heads', '2'] },
  'memory-limit-gb': { argv: ['--memory-limit-gb', '4'] },
  'allow-over-host-memory': { argv: ['--memory-limit-gb', '4', '--allow-over-host-memory'] },
  epsilon: { argv: ['--epsilon', '0.1'] },
  'epsilon-high': { argv: ['--epsilon-high', '0.3'] },
  beta: { argv: ['--beta', '0.04'] },
  tau: { argv: ['--tau', '5'] },
  margin: { argv: ['--margin', '0.02'] },
  alpha: { argv: ['--alpha', '0.5'] },
  'loss-type': { argv: ['--loss-type', 'dr_grpo'] },
  'scale-rewards': { argv: ['--scale-rewards', 'batch'] },
};

/** The argv with the case's flags replacing the base's (a flag may be given once). */
function combine(base: readonly string[], over: readonly string[]): string[] {
  const flags = new Map<string, string[]>();
  for (const list of [base, over])
    for (let i = 0; i < list.length; i++) {
      const value = list[i + 1] !== undefined && !list[i + 1]!.startsWith('--') ? [list[++i]!] : [];
      flags.set(list[i - value.length]!, value);
    }
  return [...flags].flatMap(([flag, value]) => [flag, ...value]);
}

const body = (text: string): string => text.replace(/^#.*\n/gm, '');
const notCarriedLine = (text: string): string => /^# not carried: (.*)\.$/m.exec(text)?.[1] ?? '';

async function outcome(argv: string[]): Promise<{ text: string } | { refused: ExportRefusedError }> {
  try {
    return { text: await exportOf(argv) };
  } catch (e) {
    if (e instanceof ExportRefusedError) return { refused: e };
    throw e;
  }
}

describe('every rlvr train flag is carried, refused by name, or listed as not carried', () => {
  it('each flag has a case here', () => {
    expect(TRAIN_FLAGS.filter((f) => !(f in CASES))).toEqual([]);
  });

  for (const engine of ['verl', 'prime-rl'] as const)
    for (const flag of TRAIN_FLAGS) {
      const c = CASES[flag];
      if (!c) continue;
      it(`${engine}: --${flag}`, async () => {
        const base = combine(BASE[engine], c.with ?? []);
        const without = await outcome(['--engine', engine, ...base]);
        if (!('text' in without)) throw without.refused;
        const got = await outcome(['--engine', engine, ...combine(base, c.argv)]);
        if ('refused' in got) {
          expect(got.refused.flag).toBe(`--${flag}`);
          expect(got.refused.message.split('\n')).toHaveLength(1);
          return;
        }
        const listed = notCarriedLine(got.text)
          .split(/[:,;] /)
          .includes(`--${flag}`);
        const listedIn = NOT_CARRIED[engine].some(([, flags]) => flags.includes(`--${flag}`));
        expect(listed).toBe(listedIn);
        if (listed) expect(body(got.text)).toBe(body(without.text));
        else expect(body(got.text), `--${flag} changes nothing and is not listed`).not.toBe(body(without.text));
      });
    }

  it('--use-rslora on prime-rl is refused naming --use-rslora (it named --lora-r)', async () => {
    const got = await outcome(['--engine', 'prime-rl', ...BASE['prime-rl'], '--lora-r', '4', '--use-rslora']);
    expect('refused' in got && got.refused.flag).toBe('--use-rslora');
  });
});
