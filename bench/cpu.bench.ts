/**
 * The CPU backend against its peers on the same cores, in one run with interleaved rounds (each round runs every
 * contender once; min and median over all timed repetitions): matmul 512/1024/2048, the SFT step at the default
 * size and at d256 L4 T128 batch 8, and KV-cache sampling of 16 rows x 64 and x 256 new tokens. Peers: the
 * reference backend (TypeScript kernels), tfjs-backend-wasm (XNNPACK, SIMD; see below), and PyTorch on the CPU
 * (bench/torch_cpu.py, the same model and step semantics) when `python3` has `torch`. Every contender's result is
 * checked before its time counts: matmul entries against float64, our losses against the reference backend's,
 * sampled lengths.
 *
 * tfjs-backend-wasm's threaded build cannot start in Node (its pthread worker is a blob: URL, which Node's Worker
 * refuses), so its peer row is its SIMD build on one thread; compare it with our 1-thread row too.
 *
 * The machine's ceiling comes first: a loop of 12 independent f32x4 multiply-adds (the kernels' `maddThroughput`)
 * on 1 and N threads, in the plain build (a multiply then an add) and, where the runtime has relaxed SIMD, the fused
 * one (`relaxed_madd`); each matmul row of ours is then also given as a fraction of its build's ceiling.
 *
 * Run: npm run bench:cpu [-- --threads N --rounds R --only ceiling,matmul,step,sample --all]
 * PyTorch (Debian): apt-get install -y python3-torch libopenblas0-pthread; it runs with OMP_WAIT_POLICY=PASSIVE.
 * `--all` also times the reference backend where it takes seconds per repetition (matmul 2048, the d256 step).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import * as T from '../src/index.js';
import { initParams, type TransformerConfig } from '../src/nn/index.js';
import { sampleRollouts, type SequenceBatch } from '../src/rl/index.js';
import { additionTask, sampleProblems, tokenizerFor, type Tokenizer } from '../src/tasks/index.js';
import { createStages } from '../src/cli/progress.js';
import { argValue, hasFlag, median } from './lib/common.js';
import { batchFor, MODEL_SIZES, sftStepper, withoutEos } from './lib/models.js';

const THREADS = Number(argValue('--threads') ?? T.defaultCpuThreads());
const ROUNDS = Number(argValue('--rounds') ?? 3);
const ONLY = (argValue('--only') ?? 'ceiling,matmul,step,sample').split(',');
const ALL = hasFlag('--all');
const PYTHON = '/usr/bin/python3';
const TORCH_SCRIPT = join('bench', 'torch_cpu.py');

const torchVersion = ((): string | null => {
  const r = spawnSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
})();

const fast = new T.CpuBackend({ threads: THREADS });
const fast1 = THREADS === 1 ? fast : new T.CpuBackend({ threads: 1 });
// The other build beside the default one: the plain kernels where the default is the fused build.
const plain = fast.fma ? new T.CpuBackend({ threads: THREADS, fma: false }) : null;
const plain1 = plain === null ? null : THREADS === 1 ? plain : new T.CpuBackend({ threads: 1, fma: false });
const reference = new T.ReferenceBackend();
/** Our backends, each once: every thread count of the default build, and of the plain one beside it. */
const ourBackends = [fast, fast1, plain, plain1].filter(
  (b, i, all): b is T.CpuBackend => b !== null && all.indexOf(b) === i,
);
await Promise.all(ourBackends.map((b) => b.whenReady()));
const buildName = (b: T.CpuBackend): string => (b.fma ? 'fma' : 'plain');

console.log(`bench:cpu | ${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores, node ${process.version}`);
console.log(`ours: ${fast.describe()}; rounds ${ROUNDS}, interleaved; ${new Date().toISOString()}`);
console.log(
  torchVersion
    ? `PyTorch ${torchVersion} (${PYTHON}, OMP_WAIT_POLICY=PASSIVE)`
    : `PyTorch: not found (${PYTHON} -c 'import torch' failed): apt-get install -y python3-torch libopenblas0-pthread`,
);

/** A contender: `run` performs one round and returns its timed repetitions in ms. */
interface Contender {
  readonly name: string;
  readonly run: () => Promise<number[]>;
}

/** Every contender once a round, ROUNDS rounds; each round is a stage of the progress lines. */
async function interleave(what: string, contenders: readonly Contender[]): Promise<Map<string, number[]>> {
  const times = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  const stages = createStages(ROUNDS);
  for (let r = 0; r < ROUNDS; r++) {
    stages.start(`${what}: round ${r + 1} of ${contenders.length} contenders`);
    for (const c of contenders) times.get(c.name)!.push(...(await c.run()));
    stages.done();
  }
  stages.stop();
  return times;
}

function torch(args: string[], threads: number): Record<string, unknown> {
  const r = spawnSync(PYTHON, [TORCH_SCRIPT, ...args, '--threads', String(threads)], {
    encoding: 'utf8',
    env: { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' },
  });
  if (r.status !== 0) throw new Error(`torch_cpu.py ${args.join(' ')} failed:\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
}

const torchContenders = (args: string[]): Contender[] =>
  torchVersion === null
    ? []
    : [...new Set([1, THREADS])].map((t) => ({
        name: `torch ${t}T`,
        run: async () => torch(args, t).times as number[],
      }));

/** Rows of `| name | min | median | per-unit | x vs torch |` for one measurement. */
function table(title: string, times: Map<string, number[]>, unit: (ms: number) => string, unitName: string): void {
  console.log(
    `\n${title}\n| contender | min ms | median ms | ${unitName} (min) | / torch ${THREADS}T (min) | / torch 1T (min) |`,
  );
  console.log('|---|---:|---:|---:|---:|---:|');
  const best = (n: string): number | undefined => (times.get(n)?.length ? Math.min(...times.get(n)!) : undefined);
  const tN = best(`torch ${THREADS}T`);
  const t1 = best('torch 1T');
  for (const [name, ts] of times) {
    if (ts.length === 0) continue;
    const m = Math.min(...ts);
    const ratio = (t: number | undefined): string => (t === undefined ? '—' : `${(m / t).toFixed(2)}x`);
    console.log(`| ${name} | ${m.toFixed(2)} | ${median(ts).toFixed(2)} | ${unit(m)} | ${ratio(tN)} | ${ratio(t1)} |`);
  }
}

// ---- the machine's multiply-add ceiling ----
/** Flops per iteration of each probe: 12 (chained) or 10 (addend) accumulators x 4 lanes x 2. */
const PROBE_FLOPS = { chained: 96, addend: 80 } as const;
/** GFLOP/s of the ceiling by build and thread count: the better probe, the best of the interleaved rounds. */
const ceilings = new Map<string, number>();
const ceilingKey = (b: T.CpuBackend): string => `${buildName(b)} ${b.threads}T`;
/** The two probes: accumulators through the product (`chained`), or only as its addend, as a GEMM holds them. */
const PROBES = { chained: 'maddThroughput', addend: 'maddAddendThroughput' } as const;

async function benchCeiling(): Promise<void> {
  const backends = ourBackends;
  const ITER = 400_000;
  const run = (b: T.CpuBackend, fn: string, iterations: number): void => {
    if (b.threads === 1) b.rt.call(fn, [iterations]);
    else b.rt.run(fn, [iterations]);
  };
  const contenders: Contender[] = backends.flatMap((b) =>
    Object.entries(PROBES).map(([probe, fn]): Contender => {
      // WebAssembly has no on-stack replacement: a call runs in the code its function had when it started, so the
      // loop must run many short times (on every thread) before V8's optimizing tier replaces the baseline code.
      for (let i = 0; i < 3000; i++) run(b, fn, 2000);
      return {
        name: `${ceilingKey(b)} ${probe}`,
        run: async () => {
          const ts: number[] = [];
          for (let r = 0; r < 5; r++) {
            const t0 = performance.now();
            run(b, fn, ITER);
            ts.push(performance.now() - t0);
          }
          return ts;
        },
      };
    }),
  );
  const times = await interleave('multiply-add ceiling', contenders);
  console.log('\nmultiply-add ceiling (independent f32x4 accumulators; fma: relaxed_madd, plain: mul then add)');
  console.log('| build, threads | chained: min ms | GFLOP/s | addend: min ms | GFLOP/s | ceiling (the better) |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const b of backends) {
    const gflops = (probe: keyof typeof PROBES): [number, number] => {
      const t = Math.min(...times.get(`${ceilingKey(b)} ${probe}`)!);
      return [t, (PROBE_FLOPS[probe] * ITER * b.threads) / t / 1e6];
    };
    const [tc, gc] = gflops('chained');
    const [ta, ga] = gflops('addend');
    ceilings.set(ceilingKey(b), Math.max(gc, ga));
    console.log(
      `| ${ceilingKey(b)} | ${tc.toFixed(2)} | ${gc.toFixed(1)} | ${ta.toFixed(2)} | ${ga.toFixed(1)} | ${Math.max(gc, ga).toFixed(1)} |`,
    );
  }
  if (plain !== null) {
    const ratio = ceilings.get(ceilingKey(fast1))! / ceilings.get(ceilingKey(plain1!))!;
    console.log(`fused / plain ceiling on 1 thread: ${ratio.toFixed(2)}x`);
  }
  console.log(
    'chained: each accumulator goes through the multiply (bound by its latency where a core has separate multiply ' +
      'and add pipes, AMD Zen); addend: 10 accumulators, each only the addend of a product of a value off its chain ' +
      'and one loaded from memory, as in a GEMM.',
  );
}

// ---- matmul ----
async function tfjsWasm(): Promise<null | {
  matmul: (a: Float32Array, b: Float32Array, n: number) => Promise<[Float32Array, number]>;
}> {
  try {
    const tf = await import('@tensorflow/tfjs-core');
    const wasm = await import('@tensorflow/tfjs-backend-wasm');
    const dir = createRequire(import.meta.url)
      .resolve('@tensorflow/tfjs-backend-wasm')
      .replace(/[^/\\]*$/, '');
    wasm.setWasmPaths(dir);
    if (!(await tf.setBackend('wasm'))) return null;
    return {
      matmul: async (a, b, n) => {
        const x = tf.tensor2d(a, [n, n]);
        const y = tf.tensor2d(b, [n, n]);
        const t0 = performance.now();
        const z = tf.matMul(x, y);
        const out = (await z.data()) as Float32Array;
        const ms = performance.now() - t0;
        tf.dispose([x, y, z]);
        return [out, ms];
      },
    };
  } catch (e) {
    console.log(`tfjs-backend-wasm unavailable: ${(e as Error).message}`);
    return null;
  }
}

function checkProduct(name: string, c: ArrayLike<number>, a: Float32Array, b: Float32Array, n: number): void {
  const rng = new T.Rng(5);
  for (let s = 0; s < 48; s++) {
    const i = rng.int(n);
    const j = rng.int(n);
    let ref = 0;
    for (let k = 0; k < n; k++) ref += a[i * n + k]! * b[k * n + j]!;
    if (!(Math.abs(c[i * n + j]! - ref) <= 1e-3 * (1 + Math.abs(ref))))
      throw new Error(`${name}: wrong product at (${i}, ${j}): ${c[i * n + j]} vs ${ref}`);
  }
}

async function benchMatmul(): Promise<void> {
  const tfw = await tfjsWasm();
  for (const n of [512, 1024, 2048]) {
    const rng = new T.Rng(n);
    const av = Float32Array.from({ length: n * n }, () => rng.normal());
    const bv = Float32Array.from({ length: n * n }, () => rng.normal());
    const reps = n >= 2048 ? 2 : 4;
    const ours = (backend: T.Backend, name: string, r = reps): Contender => {
      const a = T.tensor(av, [n, n], { backend });
      const b = T.tensor(bv, [n, n], { backend });
      let checked = false;
      return {
        name,
        run: async () => {
          const ts: number[] = [];
          for (let i = 0; i < r + 1; i++) {
            const t0 = performance.now();
            const c = T.matmul(a, b);
            const ms = performance.now() - t0;
            if (!checked) checkProduct(name, c.dataSync(), av, bv, n);
            checked = true;
            c.dispose();
            if (i > 0) ts.push(ms);
          }
          return ts;
        },
      };
    };
    const mine = ourBackends;
    const label = (b: T.CpuBackend): string => `ours cpu ${b.threads}T${plain === null ? '' : ` ${buildName(b)}`}`;
    const contenders: Contender[] = mine.map((b) => ours(b, label(b)));
    if (n <= 1024 || ALL) contenders.push(ours(reference, 'reference', 1));
    if (tfw)
      contenders.push({
        name: 'tfjs-wasm 1T (SIMD)',
        run: async () => {
          const ts: number[] = [];
          for (let i = 0; i < reps + 1; i++) {
            const [c, ms] = await tfw.matmul(av, bv, n);
            if (i === 0) checkProduct('tfjs-wasm', c, av, bv, n);
            else ts.push(ms);
          }
          return ts;
        },
      });
    contenders.push(...torchContenders(['matmul', '--n', String(n), '--reps', String(reps)]));
    const times = await interleave(`matmul ${n}^3`, contenders);
    table(`matmul ${n}^3 (f32)`, times, (ms) => `${((2 * n ** 3) / ms / 1e6).toFixed(1)}`, 'GFLOP/s');
    const fractions = mine.flatMap((b) => {
      const ceiling = ceilings.get(ceilingKey(b));
      if (ceiling === undefined) return [];
      const gflops = (2 * n ** 3) / Math.min(...times.get(label(b))!) / 1e6;
      return [`${label(b)} ${(gflops / ceiling).toFixed(2)} of ${ceiling.toFixed(1)}`];
    });
    if (fractions.length > 0) console.log(`fraction of its build's ceiling (GFLOP/s): ${fractions.join('; ')}`);
  }
}

// ---- SFT step ----

async function benchStep(): Promise<void> {
  const sizes: [string, TransformerConfig, SequenceBatch, string[]][] = [];
  const def = MODEL_SIZES.find((s) => s.name === 'default')!;
  const defBatch = batchFor(def);
  const setup = join(tmpdir(), `rlvr-bench-cpu-batch-${process.pid}.json`);
  writeFileSync(
    setup,
    JSON.stringify({
      B: defBatch.batchSize,
      P: defBatch.promptLen,
      C: defBatch.completionLen,
      tokens: Array.from(defBatch.tokens),
      attentionMask: Array.from(defBatch.attentionMask),
      completionMask: Array.from(defBatch.completionMask),
    }),
  );
  sizes.push([
    'default size (d64 L2, the warm-start batch B64 T13)',
    def.config,
    defBatch,
    ['--size', 'default', '--setup', setup],
  ]);
  const small = MODEL_SIZES.find((s) => s.name === 'small')!;
  sizes.push(['d256 L4 T128 batch 8', small.config, batchFor(small, 8), ['--size', 'small', '--batch', '8']]);
  for (const [title, config, batch, targs] of sizes) {
    const big = config.dModel >= 256;
    // Our losses must equal the reference backend's first losses (same init, same batch) before times count.
    const want = [sftStepper(reference, config, batch)()];
    const ours = (backend: T.Backend, name: string): Contender => {
      const step = sftStepper(backend, config, batch);
      let first = true;
      return {
        name,
        run: async () => {
          if (first) {
            const l = step();
            if (!(Math.abs(l - want[0]!) <= 1e-4 * Math.abs(want[0]!)))
              throw new Error(`${name}: first loss ${l}, the reference backend's ${want[0]}`);
            first = false;
          }
          step(); // warm-up of this round
          const ts: number[] = [];
          for (let i = 0; i < (big ? 2 : 5); i++) {
            const t0 = performance.now();
            const l = step();
            ts.push(performance.now() - t0);
            if (!Number.isFinite(l)) throw new Error(`${name}: loss ${l}`);
          }
          return ts;
        },
      };
    };
    const contenders = [ours(fast, `ours cpu ${THREADS}T${plain === null ? '' : ' fma'}`)];
    if (plain !== null) contenders.push(ours(plain, `ours cpu ${THREADS}T plain`));
    if (THREADS !== 1) contenders.push(ours(fast1, 'ours cpu 1T'));
    if (!big || ALL) contenders.push(ours(reference, 'reference'));
    contenders.push(...torchContenders(['step', ...targs, '--warmup', '2', '--steps', big ? '2' : '5']));
    const tokens = batch.batchSize * (batch.promptLen + batch.completionLen);
    table(
      `SFT step, ${title}`,
      await interleave(`SFT step, ${title}`, contenders),
      (ms) => `${((tokens / ms) * 1000).toFixed(0)}`,
      'tokens/s',
    );
  }
}

// ---- sampling ----
async function benchSample(): Promise<void> {
  const task = additionTask();
  const base = tokenizerFor(task);
  // EOS is never sampled (its id is out of range): every row generates exactly maxNewTokens.
  const tokenizer: Tokenizer = withoutEos(base);
  const prompts = sampleProblems(task, 2, new T.Rng(2)).map((p) => p.prompt);
  for (const maxNew of [64, 256]) {
    const config = { ...MODEL_SIZES.find((s) => s.name === 'default')!.config, maxSeqLen: 16 + maxNew };
    const setup = join(tmpdir(), `rlvr-bench-cpu-sample-${process.pid}.json`);
    writeFileSync(
      setup,
      JSON.stringify({ config, prompts: prompts.map((p) => Array.from(base.promptIds(p))), pad: base.pad }),
    );
    const ours = (backend: T.Backend, name: string): Contender => {
      const params = initParams(config, new T.Rng(0), { backend });
      const opts = { groupSize: 8, maxNewTokens: maxNew, temperature: 1 };
      return {
        name,
        run: async () => {
          await sampleRollouts(params, config, tokenizer, prompts, new T.Rng(3), { ...opts, maxNewTokens: 4 });
          const t0 = performance.now();
          const out = await sampleRollouts(params, config, tokenizer, prompts, new T.Rng(3), opts);
          const ms = performance.now() - t0;
          if (out.completionLen !== maxNew) throw new Error(`${name}: ${out.completionLen} tokens, wanted ${maxNew}`);
          return [ms];
        },
      };
    };
    const contenders = [ours(fast, `ours cpu ${THREADS}T`)];
    if (THREADS !== 1) contenders.push(ours(fast1, 'ours cpu 1T'));
    contenders.push(ours(reference, 'reference'));
    contenders.push(...torchContenders(['sample', '--setup', setup, '--new', String(maxNew), '--reps', '1']));
    const rows = prompts.length * 8;
    table(
      `KV-cache sampling, ${rows} rows x ${maxNew} new tokens (default model, temperature 1)`,
      await interleave(`KV-cache sampling, ${maxNew} new tokens`, contenders),
      (ms) => `${(((rows * maxNew) / ms) * 1000).toFixed(0)}`,
      'tokens/s',
    );
  }
}

if (ONLY.includes('ceiling')) await benchCeiling();
if (ONLY.includes('matmul')) await benchMatmul();
if (ONLY.includes('step')) await benchStep();
if (ONLY.includes('sample')) await benchSample();
console.log(
  `\nfallbacks to the reference kernels on ours cpu ${THREADS}T (calls): ${JSON.stringify(T.fallbackCounts(fast))}`,
);
process.exit(0);
