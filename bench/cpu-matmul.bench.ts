/**
 * Matmul GFLOP/s of the CPU backend (the WebAssembly GEMM: packed panels, a 4x8 f32x4 micro-kernel) next to two peers in
 * the same run: @tensorflow/tfjs-backend-cpu and a plain i-k-j triple loop over Float32Arrays. Printed as ratios.
 * Before timing, each side's result is checked against a float64 reference on sampled entries.
 *
 * Run: npm run bench:cpu-matmul
 */
import { Bench } from 'tinybench';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { matmul, Rng, tensor } from '../src/index.js';

const SHAPES: [string, number, number, number][] = [
  ['256^3', 256, 256, 256],
  ['512^3', 512, 512, 512],
  ['policy MLP up [512,64]x[64,192]', 512, 192, 64],
  ['policy MLP down [512,192]x[192,64]', 512, 64, 192],
  ['policy logits [512,64]x[64,24]', 512, 24, 64],
];

function ikj(a: Float32Array, b: Float32Array, m: number, k: number, n: number): Float32Array {
  const out = new Float32Array(m * n);
  for (let i = 0; i < m; i++)
    for (let kk = 0; kk < k; kk++) {
      const aik = a[i * k + kk]!;
      for (let j = 0; j < n; j++) out[i * n + j] = out[i * n + j]! + aik * b[kk * n + j]!;
    }
  return out;
}

function check(
  name: string,
  got: ArrayLike<number>,
  a: Float32Array,
  b: Float32Array,
  m: number,
  k: number,
  n: number,
): void {
  const rng = new Rng(9);
  for (let s = 0; s < 32; s++) {
    const i = rng.int(m);
    const j = rng.int(n);
    let ref = 0;
    for (let kk = 0; kk < k; kk++) ref += a[i * k + kk]! * b[kk * n + j]!;
    if (Math.abs(got[i * n + j]! - ref) > 1e-3 * (1 + Math.abs(ref)))
      throw new Error(`${name}: wrong result at (${i}, ${j}): ${got[i * n + j]} vs ${ref}`);
  }
}

await tf.setBackend('cpu');
const rng = new Rng(1);
console.log(`CPU matmul, ${process.version}, tfjs-core ${tf.version_core} (backend ${tf.getBackend()})`);
console.log('| shape | ours GFLOP/s | tfjs-cpu GFLOP/s | i-k-j loop GFLOP/s | ours / tfjs | ours / loop |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const [name, m, n, k] of SHAPES) {
  const av = Float32Array.from({ length: m * k }, () => rng.normal());
  const bv = Float32Array.from({ length: k * n }, () => rng.normal());
  const a = tensor(av, [m, k]);
  const b = tensor(bv, [k, n]);
  const ta = tf.tensor2d(av, [m, k]);
  const tb = tf.tensor2d(bv, [k, n]);
  const ours = matmul(a, b);
  check('ours', ours.dataSync(), av, bv, m, k, n);
  ours.dispose();
  const theirs = tf.matMul(ta, tb);
  check('tfjs-cpu', theirs.dataSync(), av, bv, m, k, n);
  theirs.dispose();
  check('loop', ikj(av, bv, m, k, n), av, bv, m, k, n);
  const bench = new Bench({ time: 400, warmupTime: 100 });
  bench
    .add('ours', () => matmul(a, b).dispose())
    .add('tfjs', () => tf.matMul(ta, tb).dispose())
    .add('loop', () => void ikj(av, bv, m, k, n));
  await bench.run();
  const gflops = (task: string): number => {
    const r = bench.getTask(task)!.result!;
    const meanMs =
      'latency' in r
        ? (r as unknown as { latency: { mean: number } }).latency.mean
        : (r as unknown as { mean: number }).mean;
    return (2 * m * n * k) / (meanMs * 1e6);
  };
  const [o, t, l] = [gflops('ours'), gflops('tfjs'), gflops('loop')];
  console.log(
    `| ${name} | ${o.toFixed(2)} | ${t.toFixed(2)} | ${l.toFixed(2)} | ${(o / t).toFixed(2)}x | ${(o / l).toFixed(2)}x |`,
  );
  a.dispose();
  b.dispose();
  ta.dispose();
  tb.dispose();
}
