import { describe, expect, it } from 'vitest';
import {
  blockOf,
  checkSampled,
  MATRIX_CANDIDATES,
  matrixShader,
  stagedBytes,
} from '../../bench/lib/subgroup-matrix.js';
import { describeGpu } from './helpers.js';
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

/**
 * The generated kernels compile once the matrix builtins are stood in for (llvmpipe has no subgroup matrices and
 * no f16): the rest (declarations, workgroup copies, barriers, one name per K step) is what a GPU would compile.
 */
describeGpu('the subgroup-matrix kernels, with stand-ins for the matrix builtins', (gpu) => {
  const standIns = (code: string): string =>
    `fn loadM(offset: u32, colMajor: bool, stride: u32) -> f32 { return f32(offset + stride); }
fn mma(a: f32, b: f32, acc: f32) -> f32 { return fma(a, b, acc); }
${code
  .replace(/^enable .*$/gm, '')
  .replace(/^diagnostic\(.*$/gm, '')
  .replace(/\bf16\b/g, 'f32')
  .replace(/subgroup_matrix_(left|right|result)<[^>]*>/g, 'f32')
  .replace(/subgroupMatrixLoad<\w+>\(&\w+, /g, 'loadM(')
  .replace(/subgroupMatrixMultiplyAccumulate\(/g, 'mma(')
  .replace(/subgroupMatrixStore\(&C, ([^,]+), ([^,]+), false, [^)]+\)/g, 'C[$1] = $2')
  .replace(/Acc\(\)/g, 'Acc(0)')
  .replace(/@builtin\(subgroup_id\) sg: u32/, '@builtin(local_invocation_id) lid3: vec3<u32>')
  .replace(/let sy = sg \//, 'let sg = lid3.x / 32u;\n  let sy = sg /')}`;

  it('every candidate of the 16x16x16 and 16x8x16 configurations', async () => {
    const device = gpu.runtime.device;
    for (const N of [16, 8]) {
      const cfg = { componentType: 'f16', resultComponentType: 'f32', M: 16, N, K: 16 };
      for (const cand of MATRIX_CANDIDATES) {
        if (stagedBytes(cfg, cand) > 16384) continue;
        // In a scope of its own, so that a failure is this test's and not the shared device's.
        device.pushErrorScope('validation');
        const module = device.createShaderModule({ code: standIns(matrixShader(cfg, cand, 32)) });
        const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
        await device.popErrorScope();
        expect(errors.map((m) => `${N} ${JSON.stringify(cand)} ${m.lineNum}: ${m.message}`)).toEqual([]);
      }
    }
  });
});
