/**
 * Matmul GFLOP/s of the WebGPU backend next to @tensorflow/tfjs-backend-webgpu on the same adapter and device,
 * at 256^3, 512^3, 1024^3 and at the policy's shapes, printed as a ratio ours / tfjs.
 *
 * Both sides are timed up to the result on the host (`await data()`), so completed GPU work is included and
 * the readback costs the same on both sides. Before timing, each side's result is checked against a float64
 * reference on sampled entries and both run inside a validation error scope: a failed pipeline or a dropped
 * dispatch (which once read 7,000 GFLOP/s) aborts the benchmark instead of being reported.
 *
 * "ours" is the kernel the backend picks for the adapter (on a CPU rasterizer such as llvmpipe, the direct
 * register-blocked kernel; on a GPU, the tiled workgroup-memory kernel); "ours tiled" forces the tiled kernel
 * with the configuration a GPU would get for the shape (64x64 tiles of 16x16 threads x 4x4, or 32x32 tiles when
 * that leaves fewer than 16 workgroups), so both are reported. Each shape runs several rounds
 * with the three tasks interleaved (other processes on a shared machine skew one long run), and each task's
 * figure is the median over rounds.
 *
 * Run: npm run bench:matmul [-- --quick]
 */
import { Bench } from 'tinybench';
import { createWebGpuBackend, matmul, tensor, type Tensor } from '../src/index.js';
import { setMatmulKernel } from '../src/backends/webgpu/kernels/matmul.js';
import { scratchValues as values } from '../src/backends/webgpu/kernels/tune.js';
import { loadTfjs } from './lib/tfjs.js';

interface Shape {
  readonly name: string;
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly transA?: boolean;
  readonly transB?: boolean;
}

const SHAPES: Shape[] = [
  { name: '256^3', m: 256, n: 256, k: 256 },
  { name: '512^3', m: 512, n: 512, k: 512 },
  { name: '1024^3', m: 1024, n: 1024, k: 1024 },
  { name: 'policy MLP up [512,128]x[128,512]', m: 512, n: 512, k: 128 },
  { name: 'policy proj [512,128]x[128,128]', m: 512, n: 128, k: 128 },
  { name: 'policy logits [512,128]x[128,32]', m: 512, n: 32, k: 128 },
  { name: 'policy dW [512,128]^T x [512,128]', m: 128, n: 128, k: 512, transA: true },
  { name: 'policy dX [512,512]x[128,512]^T', m: 512, n: 128, k: 512, transB: true },
];

const quick = process.argv.includes('--quick');

/** Check 64 sampled entries of C against a float64 dot product. */
function check(who: string, s: Shape, a: Float32Array, b: Float32Array, c: Float32Array): void {
  const at = (i: number, p: number): number => (s.transA ? a[p * s.m + i]! : a[i * s.k + p]!);
  const bt = (p: number, j: number): number => (s.transB ? b[j * s.k + p]! : b[p * s.n + j]!);
  for (let t = 0; t < 64; t++) {
    const i = (t * 7919) % s.m;
    const j = (t * 104729) % s.n;
    let want = 0;
    for (let p = 0; p < s.k; p++) want += at(i, p) * bt(p, j);
    const got = c[i * s.n + j]!;
    if (!(Math.abs(got - want) <= 1e-4 * Math.sqrt(s.k) + 1e-4 * Math.abs(want))) {
      throw new Error(
        `${who} ${s.name}: C[${i},${j}] = ${got}, want ${want}: the kernel is wrong or its dispatch was dropped`,
      );
    }
  }
}

async function scoped<T>(device: GPUDevice, who: string, f: () => Promise<T>): Promise<T> {
  device.pushErrorScope('validation');
  const out = await f();
  const err = await device.popErrorScope();
  if (err) throw new Error(`${who}: validation error: ${err.message}`);
  return out;
}

interface Row {
  shape: string;
  ours: number;
  tiled: number;
  tfjs: number;
  ratio: number;
}

const ROUNDS = 3;

async function main(): Promise<void> {
  const ours = await createWebGpuBackend();
  const device = ours.runtime.device;
  const tf = await loadTfjs(ours);
  console.log(`adapter: ${ours.adapter.summary}`);
  console.log(
    `tfjs-core ${tf.version_core}, backend ${tf.getBackend()} on the same GPUDevice; timing: until the result is on the host`,
  );
  console.log(`node ${process.version}, ${(await import('node:os')).cpus().length} CPU cores`);
  const rows: Row[] = [];
  for (const s of SHAPES) {
    const aShape: [number, number] = s.transA ? [s.k, s.m] : [s.m, s.k];
    const bShape: [number, number] = s.transB ? [s.n, s.k] : [s.k, s.n];
    const av = values(aShape[0] * aShape[1], 1);
    const bv = values(bShape[0] * bShape[1], 2);
    const a = tensor(av, aShape, { backend: ours });
    const b = tensor(bv, bShape, { backend: ours });
    const ta = tf.tensor2d(av, aShape);
    const tb = tf.tensor2d(bv, bShape);
    const runOurs = async (): Promise<Float32Array> => {
      const c: Tensor = matmul(a, b, { transA: s.transA, transB: s.transB });
      const d = (await c.data()) as Float32Array;
      c.dispose();
      return d;
    };
    const runTf = async (): Promise<Float32Array> => {
      const c = tf.matMul(ta, tb, s.transA, s.transB);
      const d = await c.data();
      c.dispose();
      return d;
    };
    check('ours', s, av, bv, await scoped(device, 'ours', runOurs));
    check('tfjs', s, av, bv, await scoped(device, 'tfjs', runTf));
    const flops = 2 * s.m * s.n * s.k;
    const runTiled = async (): Promise<Float32Array> => {
      setMatmulKernel('tiled');
      try {
        return await runOurs();
      } finally {
        setMatmulKernel(null);
      }
    };
    check('ours tiled', s, av, bv, await scoped(device, 'ours tiled', runTiled));
    const budget = quick ? 200 : Math.max(400, Math.min(1500, flops / 4e6));
    const samples: Record<string, number[]> = { ours: [], 'ours tiled': [], tfjs: [] };
    for (let round = 0; round < (quick ? 1 : ROUNDS); round++) {
      const bench = new Bench({ time: budget, iterations: 3, warmupIterations: 1, warmupTime: 0 });
      bench.add('ours', runOurs).add('ours tiled', runTiled).add('tfjs', runTf);
      await bench.run();
      for (const name of Object.keys(samples)) {
        const r = bench.getTask(name)?.result;
        if (!r || !('latency' in r)) throw new Error(`${name}: no result (${r?.state})`);
        samples[name]!.push(flops / (r.latency.mean * 1e-3) / 1e9);
      }
    }
    const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
    const row = {
      shape: s.name,
      ours: median(samples.ours!),
      tiled: median(samples['ours tiled']!),
      tfjs: median(samples.tfjs!),
      ratio: 0,
    };
    row.ratio = row.ours / row.tfjs;
    rows.push(row);
    console.log(
      `${s.name.padEnd(36)} ours ${row.ours.toFixed(2).padStart(6)}  ours tiled ${row.tiled.toFixed(2).padStart(6)}  tfjs ${row.tfjs.toFixed(2).padStart(6)} GFLOP/s   ours/tfjs ${row.ratio.toFixed(2)}x`,
    );
    a.dispose();
    b.dispose();
    ta.dispose();
    tb.dispose();
  }
  await ours.sync(); // throws if anything recorded a GPU error during the run
  console.table(
    rows.map((r) => ({
      shape: r.shape,
      'ours GFLOP/s': +r.ours.toFixed(2),
      'ours tiled GFLOP/s': +r.tiled.toFixed(2),
      'tfjs GFLOP/s': +r.tfjs.toFixed(2),
      'ours/tfjs': +r.ratio.toFixed(2),
      'tiled/tfjs': +(r.tiled / r.tfjs).toFixed(2),
    })),
  );
  console.log(
    `kernel picked by the backend on this adapter: ${ours.runtime.cpuLike ? 'direct (CPU rasterizer)' : 'tiled (GPU)'}`,
  );
  ours.dispose();
}

await main();
