import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';

/**
 * bench:cpu's multiply-add ceilings count flops they must really do: on the plain build (a multiply, then an add,
 * each rounded to f32), lane 0 of the sum of the accumulators after n iterations equals the same arithmetic done in
 * JavaScript with Math.fround after every operation. A loop the compiler shortened, or a count that does not match
 * the accumulators updated, would give another value.
 */
const f = Math.fround;

/** 12 accumulators a_k <- a_k x + y, from a_k = k. */
function chained(n: number, x: number): number {
  const a = Array.from({ length: 12 }, (_, k) => k);
  for (let i = 0; i < n; i++) for (let k = 0; k < 12; k++) a[k] = f(f(a[k]! * x) + f(1e-3));
  const s = f(f(f(a[0]! + a[1]!) + f(a[2]! + a[3]!)) + f(f(a[4]! + a[5]!) + f(a[6]! + a[7]!)));
  return f(s + f(f(a[8]! + a[9]!) + f(a[10]! + a[11]!)));
}

/** 10 accumulators a_k <- x_i b_k + a_k, x_i = x_{i-1} 0.9999999, b_k = (k + 1) 1e-3 (f32), from a_k = k. */
function addend(n: number, x0: number): number {
  const a = Array.from({ length: 10 }, (_, k) => k);
  const b = Array.from({ length: 10 }, (_, k) => f((k + 1) * 1e-3));
  let x = x0;
  for (let i = 0; i < n; i++) {
    x = f(x * f(0.9999999));
    for (let k = 0; k < 10; k++) a[k] = f(f(x * b[k]!) + a[k]!);
  }
  const s = f(f(f(a[0]! + a[1]!) + f(a[2]! + a[3]!)) + f(f(a[4]! + a[5]!) + f(a[6]! + a[7]!)));
  return f(s + f(a[8]! + a[9]!));
}

describe('the multiply-add ceiling probes (plain build)', () => {
  const cpu = new T.CpuBackend({ threads: 1, fma: false });
  // A call with one argument: tid and nthreads are 0, so x = 0.999 rounded to f32.
  const x = f(0.999);
  it('maddThroughput: 12 chained accumulators, every iteration', () => {
    for (const n of [1, 7, 300]) expect(cpu.rt.call('maddThroughput', [n])).toBe(chained(n, x));
  });
  it('maddAddendThroughput: 10 accumulators fed by products off their chains, every iteration', () => {
    for (const n of [1, 7, 300]) expect(cpu.rt.call('maddAddendThroughput', [n])).toBe(addend(n, x));
  });
});
