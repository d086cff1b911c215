import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as E from 'fp-ts/lib/Either.js';
import { parseExportArgs } from '../../../src/cli/args.js';
import { exportConfig, resolveExport } from '../../../src/cli/export-config.js';

/**
 * What the exported files do when read as their engines read them: the verl script run by bash with a stub
 * `python3` on PATH that records the trainer's arguments and environment (no verl needed), its overrides read
 * as Hydra and OmegaConf would read them; prime-rl's TOML parsed by Python's tomllib.
 */

export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** The stub: `python3 -c ...` prints a reward file's path; `python3 -m verl...` records its argv and env. */
const STUB = `#!${process.execPath}
const args = process.argv.slice(2);
if (args[0] === '-c') { console.log('/stub/rlvr_objectives/boxed.py'); process.exit(0); }
require('node:fs').writeFileSync(process.env.STUB_OUT, JSON.stringify({ argv: args, env: process.env }));
`;

export interface ScriptRun {
  readonly status: number | null;
  readonly stderr: string;
  /** The arguments after `python3 -m verl.trainer.main_ppo`, and the environment it saw (absent if not reached). */
  readonly argv?: string[];
  readonly env?: Record<string, string>;
  /** The files in the directory the script ran in, afterwards (it starts empty). */
  readonly files: string[];
}

/** Run a verl script with bash in an empty directory, `python3` stubbed. */
export function runVerlScript(script: string, env: Record<string, string> = {}, extraArgs: string[] = []): ScriptRun {
  const dir = mkdtempSync(join(tmpdir(), 'rlvr-verl-script-'));
  const bin = join(dir, 'bin');
  const cwd = join(dir, 'cwd');
  mkdirSync(bin);
  mkdirSync(cwd);
  writeFileSync(join(bin, 'python3'), STUB);
  chmodSync(join(bin, 'python3'), 0o755);
  const out = join(dir, 'out.json');
  writeFileSync(join(dir, 't.sh'), script);
  const r = spawnSync('bash', [join(dir, 't.sh'), ...extraArgs], {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: `${bin}:${process.env.PATH}`,
      STUB_OUT: out,
      RLVR_TRAIN_PARQUET: '/data/train.parquet',
      RLVR_VAL_PARQUET: '/data/val.parquet',
      ...env,
    },
  });
  const files = readdirSync(cwd);
  if (!existsSync(out)) return { status: r.status, stderr: r.stderr, files };
  const recorded = JSON.parse(readFileSync(out, 'utf8')) as { argv: string[]; env: Record<string, string> };
  return { status: r.status, stderr: r.stderr, argv: recorded.argv.slice(2), env: recorded.env, files };
}

/**
 * A string as OmegaConf reads it from an environment variable (`${oc.env:X}`, whose result it resolves again):
 * backslashes before `${` pair up, and an odd one escapes it; an unescaped `${` would be an interpolation.
 */
export function omegaConfRead(text: string): string {
  return text.replace(/(\\+)\$\{/g, (_m, slashes: string) => {
    if (slashes.length % 2 === 0) throw new Error(`an interpolation OmegaConf would resolve: ${text}`);
    return `${'\\'.repeat((slashes.length - 1) / 2)}\${`;
  });
}

/**
 * The overrides a verl run received, as verl reads them: `key=value` split at the first `=`; a value
 * `${oc.env:NAME}` is NAME's value as OmegaConf reads it. Each key once.
 */
export function verlOverrides(run: ScriptRun): Map<string, string> {
  if (!run.argv || !run.env) throw new Error(`the script did not reach verl (exit ${run.status}): ${run.stderr}`);
  const out = new Map<string, string>();
  for (const arg of run.argv) {
    const eq = arg.indexOf('=');
    if (eq < 0) throw new Error(`not a Hydra override: ${arg}`);
    const key = arg.slice(0, eq);
    let value = arg.slice(eq + 1);
    const env = /^\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(value);
    if (env) {
      const v = run.env[env[1]!];
      if (v === undefined) throw new Error(`${key} reads ${env[1]}, which the script does not set`);
      value = omegaConfRead(v);
    }
    if (out.has(key)) throw new Error(`${key} given twice (Hydra refuses it)`);
    out.set(key, value);
  }
  return out;
}

/** A TOML file as Python's tomllib reads it (throws with tomllib's message when it does not parse). */
export function readToml(text: string): Record<string, unknown> {
  const r = spawnSync(PYTHON, ['-c', 'import sys, json, tomllib; print(json.dumps(tomllib.loads(sys.stdin.read())))'], {
    input: text,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`tomllib: ${r.stderr.trim().split('\n').at(-1)}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

export const at = (t: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown> | undefined)?.[k], t);

/** `rlvr export-config` as the CLI resolves and writes it; the refusal or error is thrown. */
export async function exportOf(argv: readonly string[]): Promise<string> {
  const args = parseExportArgs(argv);
  if (E.isLeft(args)) throw args.left;
  const resolved = await resolveExport(args.right);
  if (E.isLeft(resolved)) throw resolved.left;
  const out = exportConfig(resolved.right.engine, resolved.right.cfg, resolved.right.target);
  if (E.isLeft(out)) throw out.left;
  return out.right;
}
