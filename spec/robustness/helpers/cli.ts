import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { build } from 'esbuild';
import { wasmKernels } from '../../../esbuild.wasm.mjs';

/**
 * The CLI as `npm run rlvr` bundles it (shaders as text), built once per spec file under node_modules (so its
 * packages resolve), and ways to run it: to the end (`rlvrSync`), or as a child to signal or pipe (`rlvrChild`).
 */
export const TINY_ARGS = [
  ...['--warm-start-steps', '2', '--steps', '1', '--eval-prompts', '4', '--prompts-per-step', '2'],
  ...['--num-generations', '2', '--warm-start-batch-size', '4', '--d-model', '16', '--n-layers', '1'],
  ...['--n-heads', '2', '--n-kv-heads', '2', '--max-completion-length', '6'],
  // The task, objective and schedule these specs were written against (the defaults until they became the main
  // job's regime), stated so that a change of defaults does not change what they run.
  ...['--digits', '2', '--objective', 'conspo', '--warm-start-until', 'none', '--temperature', '1'],
  ...['--learning-rate', '1e-4', '--warmup-steps', '5', '--eval-every', '0'],
];

/** `args` with some flags' values replaced (a flag may be given once). */
export function withArgs(args: readonly string[], over: Readonly<Record<string, string>>): string[] {
  const out = [...args];
  for (const [flag, value] of Object.entries(over)) {
    const i = out.indexOf(flag);
    if (i >= 0) out[i + 1] = value;
    else out.push(flag, value);
  }
  return out;
}

/**
 * A program of the repository bundled as `npm run` builds it: the CLI by default, or another entry (`entry`, its
 * bundle's name ending in `suffix`: a benchmark runs its command only when its file is named as its own).
 */
export function cliBundle(
  tag: string,
  entry = 'src/cli/main.ts',
  suffix = '.mjs',
): { path: string; build: () => Promise<void>; remove: () => void } {
  const path = join(process.cwd(), 'node_modules', '.cache', 'rlvr-robustness-spec', `${tag}-${process.pid}${suffix}`);
  return {
    path,
    build: async () => {
      mkdirSync(dirname(path), { recursive: true });
      await build({
        entryPoints: [entry],
        outfile: path,
        bundle: true,
        platform: 'node',
        format: 'esm',
        target: 'node20',
        loader: { '.wgsl': 'text' },
        plugins: [wasmKernels],
        packages: 'external',
        logLevel: 'warning',
        absWorkingDir: process.cwd(),
      });
    },
    remove: () => rmSync(path, { force: true }),
  };
}

export function rlvrSync(
  bundle: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [bundle, ...args], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  });
}

export interface ChildRun {
  readonly child: ReturnType<typeof spawn>;
  /** Resolves when stdout has printed a line matching `re`. */
  readonly waitFor: (re: RegExp) => Promise<void>;
  readonly done: Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>;
}

export function rlvrChild(
  bundle: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): ChildRun {
  const child = spawn(process.execPath, [bundle, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const waiters: { re: RegExp; resolve: () => void }[] = [];
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    for (const w of [...waiters]) {
      if (w.re.test(stdout)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }>(
    (resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  return {
    child,
    waitFor: (re) =>
      new Promise<void>((resolve, reject) => {
        if (re.test(stdout)) return resolve();
        waiters.push({ re, resolve });
        void done.then(() => reject(new Error(`exited before printing ${re}: ${stdout}\n${stderr}`)));
      }),
    done,
  };
}
