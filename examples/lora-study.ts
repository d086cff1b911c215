/**
 * LoRA RL against full fine-tuning on the main job, from the same full warm-start: each seed warm-starts once
 * (`rlvr train --steps 0`: every weight, stopped at RL step 0 with its checkpoint), then every variant resumes that
 * checkpoint with its own RL (a full checkpoint at RL step 0 takes LoRA adapters there), so all variants of a seed
 * start from the same policy. Each run is its own `rlvr train` process (one thread, `--jobs` at a time) under
 * `/usr/bin/time`, so its wall time and peak resident memory are measured from outside. One JSON line per run in
 * OUTPUT/results.jsonl (a run whose line exists is skipped), then a table per variant: the held-out pass@1 gain and
 * its share of full fine-tuning's on the same seed.
 *
 *   npm run example:lora-study -- --seeds 0,1,2 --variants full,r1:5e-4,r1:1e-3,r8:5e-4 [--alpha 32] [--jobs 2]
 *                                  [--output runs/lora-study] [--report-only]
 *
 * A variant is `full` (full fine-tuning at the default learning rate), `full:LR`, or `rR:LR` (LoRA of rank R on
 * every linear layer, lora_alpha --alpha, RL learning rate LR), or `rR` (the CLI's LoRA default learning rate); a
 * third field sets the RL steps (`r1::450`: 450 steps at the default learning rate).
 */
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string', default: '0,1,2' },
    variants: { type: 'string', default: 'full,r1,r8,r32' },
    alpha: { type: 'string', default: '32' },
    jobs: { type: 'string', default: '2' },
    output: { type: 'string', default: join('runs', 'lora-study') },
    'report-only': { type: 'boolean', default: false },
  },
});
const seeds = values.seeds.split(',').map(Number);
const variants = values.variants.split(',');
const out = values.output;
const resultsFile = join(out, 'results.jsonl');
mkdirSync(out, { recursive: true });

interface Result {
  readonly seed: number;
  readonly variant: string;
  readonly before: number;
  readonly after: number;
  readonly wallSeconds: number;
  /** User + system CPU seconds: what the run cost, whatever else the machine was doing (one thread). */
  readonly cpuSeconds?: number;
  readonly peakRssMiB: number;
  readonly estimate: string;
}

const cli = join('dist', 'cli', 'main.js');

/** Run one `rlvr train` under /usr/bin/time; resolves with its output and its wall time and peak RSS. */
function runCli(args: string[], log: string): Promise<{ text: string; wall: number; rssKiB: number; cpu: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/time', ['-f', 'TIME %e %M %U %S', 'node', cli, 'train', '--threads', '1', ...args]);
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('close', (code) => {
      appendFileSync(log, text);
      if (code !== 0) return reject(new Error(`rlvr train ${args.join(' ')} exited ${code}; see ${log}`));
      const m = /TIME ([\d.]+) (\d+) ([\d.]+) ([\d.]+)/.exec(text);
      resolve({ text, wall: Number(m?.[1]), rssKiB: Number(m?.[2]), cpu: Number(m?.[3]) + Number(m?.[4]) });
    });
  });
}

function variantFlags(v: string): string[] {
  const [kind, lr, steps] = v.split(':');
  const rest = [...(lr ? ['--learning-rate', lr] : []), ...(steps ? ['--steps', steps] : [])];
  if (kind === 'full') return rest;
  const r = /^r(\d+)$/.exec(kind ?? '');
  if (!r) throw new Error(`variant ${v}: expected full[:LR[:STEPS]] or rN[:LR[:STEPS]]`);
  return ['--lora-r', r[1]!, '--lora-alpha', values.alpha, '--lora-target-modules', 'all-linear', ...rest];
}

const done = (): Result[] =>
  existsSync(resultsFile)
    ? readFileSync(resultsFile, 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as Result)
    : [];

const warming = new Map<number, Promise<string>>();
/** The seed's warm-start checkpoint, made once (a variant waits for the run already making it). */
function warmStart(seed: number): Promise<string> {
  if (!warming.has(seed)) warming.set(seed, makeWarmStart(seed));
  return warming.get(seed)!;
}

async function makeWarmStart(seed: number): Promise<string> {
  const dir = join(out, `warm-s${seed}`);
  const ck = join(dir, 'checkpoint');
  if (!existsSync(join(ck, 'trainer_state.json')) && !existsSync(join(ck, 'manifest.json')))
    await runCli(['--seed', String(seed), '--steps', '0', '--output', dir, '--overwrite'], join(out, 'warm.log'));
  return ck;
}

async function runVariant(seed: number, variant: string): Promise<void> {
  const ck = await warmStart(seed);
  const dir = join(out, `${variant.replaceAll(':', '-')}-s${seed}`);
  const args = ['--seed', String(seed), '--resume', ck, '--output', dir, '--overwrite', ...variantFlags(variant)];
  const { text, wall, rssKiB, cpu } = await runCli(args, join(out, 'runs.log'));
  const m = /after warm-start ([\d.]+), after (?:LoRA )?RL(?: \(r \d+\))? ([\d.]+)/.exec(text);
  if (!m) throw new Error(`no result line for ${variant} seed ${seed}`);
  const estimate = /memory estimate: ([\d.]+ [MG]iB)/.exec(text)?.[1] ?? '?';
  const result: Result = {
    seed,
    variant,
    before: Number(m[1]),
    after: Number(m[2]),
    wallSeconds: wall,
    cpuSeconds: Math.round(cpu * 10) / 10,
    peakRssMiB: Math.round(rssKiB / 1024),
    estimate,
  };
  appendFileSync(resultsFile, `${JSON.stringify(result)}\n`);
  console.log(`${variant} s${seed}: ${result.before} -> ${result.after} in ${wall} s, ${result.peakRssMiB} MiB`);
}

async function main(): Promise<void> {
  if (!values['report-only']) {
    // Warm-starts first, one per seed, then the variants; `--jobs` processes at a time.
    const have = new Set(done().map((r) => `${r.variant}/${r.seed}`));
    const queue: (() => Promise<unknown>)[] = [
      ...seeds.map((s) => () => warmStart(s)),
      ...seeds.flatMap((s) => variants.filter((v) => !have.has(`${v}/${s}`)).map((v) => () => runVariant(s, v))),
    ];
    let next = 0;
    let finished = 0;
    const t0 = performance.now();
    // Each run takes minutes and prints when it ends: between, a line every minute says where the study is.
    const heartbeat = setInterval(
      () =>
        console.log(
          `${finished} of ${queue.length} runs done, ${next - finished} running, ` +
            `${Math.round((performance.now() - t0) / 1000)} s`,
        ),
      60_000,
    );
    heartbeat.unref();
    const worker = async (): Promise<void> => {
      while (next < queue.length) {
        await queue[next++]!();
        finished += 1;
      }
    };
    try {
      await Promise.all(Array.from({ length: Number(values.jobs) }, worker));
    } finally {
      clearInterval(heartbeat);
    }
  }
  report(done());
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? Number.NaN : n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
};

function report(results: Result[]): void {
  const full = new Map(results.filter((r) => r.variant === 'full').map((r) => [r.seed, r.after - r.before]));
  const byVariant = new Map<string, Result[]>();
  for (const r of results) byVariant.set(r.variant, [...(byVariant.get(r.variant) ?? []), r]);
  console.log(
    '\n| variant | seeds | gain per seed (points) | median gain | median share of full FT | worst vs warm-start | wall (median s) | CPU (median s) | peak RSS (median MiB) |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const [variant, rs] of byVariant) {
    const sorted = [...rs].sort((a, b) => a.seed - b.seed);
    const gains = sorted.map((r) => 100 * (r.after - r.before));
    const cpus = sorted.flatMap((r) => (r.cpuSeconds === undefined ? [] : [r.cpuSeconds]));
    const shares = sorted.filter((r) => full.has(r.seed)).map((r) => (r.after - r.before) / full.get(r.seed)!);
    console.log(
      `| ${variant} | ${sorted.map((r) => r.seed).join(',')} | ${gains.map((g) => g.toFixed(1)).join(', ')} | ` +
        `${median(gains).toFixed(1)} | ${shares.length ? `${(100 * median(shares)).toFixed(0)}%` : '-'} | ` +
        `${Math.min(...gains).toFixed(1)} | ${median(sorted.map((r) => r.wallSeconds)).toFixed(0)} | ` +
        `${cpus.length ? median(cpus).toFixed(0) : '-'} | ` +
        `${median(sorted.map((r) => r.peakRssMiB)).toFixed(0)} |`,
    );
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : String(e));
  process.exit(1);
});
