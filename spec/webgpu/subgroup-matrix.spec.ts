import { describe, expect, it } from 'vitest';
import { blockOf, checkSampled, MATRIX_CANDIDATES } from '../../bench/lib/subgroup-matrix.js';
import { halfReader, roundToHalf } from '../../src/core/half.js';

/**
 * bench:gpu's subgroup-matrix matmul runs only on a device with matrix units, so what llvmpipe can hold it to is
 * its gate: the sampled check must pass a product rounded as an f32 accumulation would, and fail one with a
 * missing or misplaced tile.
 */
describe('the subgroup-matrix matmul check', () => {
  const n = 64;
  const f16 = halfReader('f16');
  const values = (seed: number): Float32Array =>
    Float32Array.from(
      roundToHalf(
        'f16',
        Array.from({ length: n * n }, (_, i) => Math.sin(seed * 1000 + i)),
      ),
      f16,
    );
  const a = values(1);
  const b = values(2);
  // An f32 accumulation, k from the top down: not the check's order, so its rounding differs from an f64 sum.
  const c = new Float32Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let k = n - 1; k >= 0; k--) s = Math.fround(s + Math.fround(a[i * n + k]! * b[k * n + j]!));
      c[i * n + j] = s;
    }
  const every = Array.from({ length: n * n }, (_, x): [number, number] => [Math.floor(x / n), x % n]);

  it('passes an f32-accumulated product', () => {
    expect(checkSampled(a, b, c, n, every)).toBeNull();
  });

  it('fails a product with a 16 x 16 tile left at zero, or two tiles swapped', () => {
    const dropped = c.slice();
    for (let i = 16; i < 32; i++) dropped.fill(0, i * n + 32, i * n + 48);
    expect(checkSampled(a, b, dropped, n, every)).toMatch(/^C\[16, 32\]/);
    const swapped = c.slice();
    for (let i = 0; i < 16; i++)
      for (let j = 0; j < 16; j++) [swapped[i * n + j], swapped[i * n + 16 + j]] = [c[i * n + 16 + j]!, c[i * n + j]!];
    expect(checkSampled(a, b, swapped, n, every)).not.toBeNull();
  });

  it('fails NaN', () => {
    const bad = c.slice();
    bad[5] = Number.NaN;
    expect(checkSampled(a, b, bad, n, [[0, 5]])).toMatch(/NaN/);
  });

  it("every candidate's block divides the benchmark's 4096 for 8x8x8 and 16x16x16 configurations", () => {
    for (const size of [8, 16])
      for (const cand of MATRIX_CANDIDATES) {
        const { rows, cols } = blockOf(
          { componentType: 'f16', resultComponentType: 'f32', M: size, N: size, K: size },
          cand,
        );
        expect([4096 % rows, 4096 % cols]).toEqual([0, 0]);
      }
  });
});
