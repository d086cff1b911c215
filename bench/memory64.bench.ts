/**
 * What the memory64 build of the CPU backend's kernels costs against the 32-bit build on the same shapes: matmul
 * 1024^3 and the SFT step (the default size, and d256 L4 T128 batch 8), on N threads and on one, in one run with
 * interleaved rounds (each round runs every contender once), minimum and median over every timed repetition, each
 * as wall time and as the process's CPU time (user + system of every thread: on a machine other work loads, the
 * CPU time a repetition took moves less than its wall time; on N threads it includes the workers' waiting spins).
 * The memory64 backend's tensors lie past 4 GiB (4.5 GiB carved first, never touched), as a run that needs
 * memory64 places them. Before times count, both builds' first results must be equal bit for bit.
 *
 * Run (Node >= 24): npm run bench:memory64 [-- --threads N --rounds R --fma on|off --only matmul,step]
 * `NODE_OPTIONS=--disable-wasm-trap-handler` times both builds with explicit bounds checks instead of guard regions.
 */
import { cpus, loadavg } from 'node:os';
import * as T from '../src/index.js';
import type { TransformerConfig } from '../src/nn/index.js';
import type { SequenceBatch } from '../src/rl/index.js';
import { argValue, median } from './lib/common.js';
import { batchFor, MODEL_SIZES, sftStepper } from './lib/models.js';

const THREADS = Number(argValue('--threads') ?? T.defaultCpuThreads());
const ROUNDS = Number(argValue('--rounds') ?? 5);
const FMA = (argValue('--fma') ?? (T.runtimeHasRelaxedSimd() ? 'on' : 'off')) === 'on';
const ONLY = (argValue('--only') ?? 'matmul,step').split(',');
const PAST_4_GIB = 4.5 * 1024 ** 3;

if (!T.runtimeHasMemory64()) {
  console.log(`bench:memory64 needs memory64 (Node >= 24); node ${process.version} lacks it`);
  process.exit(1);
}

const open = (threads: number, memory64: boolean): T.CpuBackend => {
  const b = new T.CpuBackend({ threads, fma: FMA, memory64 });
  if (memory64) b.rt.alloc(PAST_4_GIB);
  return b;
};
const threadCounts = [...new Set([THREADS, 1])];
const backends = threadCounts.flatMap((t) => [false, true].map((m64) => ({ t, m64, b: open(t, m64) })));
await Promise.all(backends.map(({ b }) => b.whenReady()));

console.log(`bench:memory64 | ${cpus()[0]?.model ?? 'cpu'}, ${cpus().length} cores, node ${process.version}`);
console.log(
  `builds: ${FMA ? 'relaxed SIMD (FMA)' : 'plain SIMD'}; rounds ${ROUNDS}, interleaved; ${new Date().toISOString()}`,
);
console.log(
  `NODE_OPTIONS=${process.env.NODE_OPTIONS ?? ''}; load average at start ${loadavg().map((x) => x.toFixed(2))}`,
);

interface Sample {
  readonly wall: number;
  readonly cpu: number;
}

/** Wall and CPU milliseconds of one call. */
function timed(f: () => void): Sample {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  f();
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1000 };
}

interface Contender {
  readonly name: string;
  readonly run: () => Sample[];
}

function interleave(contenders: readonly Contender[]): Map<string, Sample[]> {
  const out = new Map<string, Sample[]>(contenders.map((c) => [c.name, []]));
  for (let r = 0; r < ROUNDS; r++) for (const c of contenders) out.get(c.name)!.push(...c.run());
  return out;
}

/** Per thread count: each build's min and median, wall and CPU, and memory64 / wasm32 of each. */
function table(title: string, samples: Map<string, Sample[]>): void {
  console.log(`\n${title}`);
  console.log('| threads | build | wall min ms | wall median ms | cpu min ms | cpu median ms |');
  console.log('|---:|---|---:|---:|---:|---:|');
  const stat = (name: string, k: keyof Sample) => {
    const xs = samples.get(name)!.map((s) => s[k]);
    return [Math.min(...xs), median(xs)] as const;
  };
  for (const t of threadCounts) {
    for (const m64 of [false, true]) {
      const name = `${t}T ${m64 ? 'memory64' : 'wasm32'}`;
      const [wm, wd] = stat(name, 'wall');
      const [cm, cd] = stat(name, 'cpu');
      console.log(
        `| ${t} | ${m64 ? 'memory64' : 'wasm32'} | ${wm.toFixed(1)} | ${wd.toFixed(1)} | ${cm.toFixed(1)} | ${cd.toFixed(1)} |`,
      );
    }
    const ratio = (k: keyof Sample, i: 0 | 1) => (stat(`${t}T memory64`, k)[i] / stat(`${t}T wasm32`, k)[i]).toFixed(3);
    console.log(
      `| ${t} | memory64 / wasm32 | ${ratio('wall', 0)} | ${ratio('wall', 1)} | ${ratio('cpu', 0)} | ${ratio('cpu', 1)} |`,
    );
  }
}

function benchMatmul(n: number): void {
  const rng = new T.Rng(n);
  const av = Float32Array.from({ length: n * n }, () => rng.normal());
  const bv = Float32Array.from({ length: n * n }, () => rng.normal());
  const first = new Map<string, Float32Array>();
  const contenders = backends.map(({ t, m64, b }): Contender => {
    const name = `${t}T ${m64 ? 'memory64' : 'wasm32'}`;
    const x = T.tensor(av, [n, n], { backend: b });
    const y = T.tensor(bv, [n, n], { backend: b });
    const c = T.matmul(x, y);
    first.set(name, c.dataSync() as Float32Array);
    c.dispose();
    return {
      name,
      run: () => {
        T.matmul(x, y).dispose(); // this round's warm-up
        return [0, 1, 2].map(() => timed(() => T.matmul(x, y).dispose()));
      },
    };
  });
  const [ref, ...rest] = [...first.values()];
  for (const r of rest) if (!r.every((v, i) => v === ref![i])) throw new Error('the builds differ in matmul');
  table(`matmul ${n}^3 (f32), ${((2 * n ** 3) / 1e9).toFixed(2)} GFLOP a call`, interleave(contenders));
}

function benchStep(title: string, config: TransformerConfig, batch: SequenceBatch, reps: number): void {
  const firstLoss = new Map<string, number>();
  const contenders = backends.map(({ t, m64, b }): Contender => {
    const name = `${t}T ${m64 ? 'memory64' : 'wasm32'}`;
    const step = sftStepper(b, config, batch);
    firstLoss.set(name, step());
    return {
      name,
      run: () => {
        step(); // this round's warm-up
        return Array.from({ length: reps }, () => timed(() => void step()));
      },
    };
  });
  if (new Set(firstLoss.values()).size !== 1) throw new Error(`the builds' first losses differ: ${[...firstLoss]}`);
  table(`SFT step (forward, backward, AdamW), ${title}`, interleave(contenders));
}

if (ONLY.includes('matmul')) benchMatmul(1024);
if (ONLY.includes('step')) {
  const def = MODEL_SIZES.find((s) => s.name === 'default')!;
  benchStep('default size (d64 L2, the warm-start batch B64 T13)', def.config, batchFor(def), 5);
  const small = MODEL_SIZES.find((s) => s.name === 'small')!;
  benchStep('d256 L4 T128 batch 8', small.config, batchFor(small, 8), 2);
}
console.log(`\nload average at end ${loadavg().map((x) => x.toFixed(2))}`);
for (const { b } of backends) b.dispose();
