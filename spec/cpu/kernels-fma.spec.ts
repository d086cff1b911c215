import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { cpuKernelSpecs, fusedHardware } from './kernel-cases.js';

/**
 * The relaxed-SIMD build (`f32x4.relaxed_madd`, a fused multiply-add where the processor has one) through the same
 * cases as the plain build, plus how the two builds relate: they differ by rounding only, and the fused build does
 * fuse where the processor can. Node >= 22 has relaxed SIMD; CI runs on such a Node, so there a runtime without it
 * fails this file instead of skipping it.
 */
const available = T.runtimeHasRelaxedSimd();

if (available) cpuKernelSpecs(true);
else
  it('relaxed SIMD is available (Node >= 22), or this file is skipped outside CI', () => {
    if (process.env.CI === 'true')
      expect.fail(`relaxed SIMD is missing on node ${process.version}: CI runs Node >= 22`);
  });

describe.runIf(available)('the relaxed-SIMD build against the plain one', () => {
  it('a product rounds once where the processor fuses (x86 with FMA3 here), twice in the plain build', () => {
    const plain = new T.CpuBackend({ threads: 1, fma: false });
    const fused = new T.CpuBackend({ threads: 1, fma: true });
    // -1 + (1 + 2^-12)^2 = 2^-11 + 2^-24 exactly: a fused step from -1 keeps the 2^-24; rounding the product drops it.
    const x = 1 + 2 ** -12;
    const dot = (backend: T.Backend): number =>
      T.tidy(
        () => T.matmul(T.tensor([-1, x], [1, 2], { backend }), T.tensor([1, x], [2, 1], { backend })).dataSync()[0]!,
      );
    expect(dot(plain)).toBe(2 ** -11);
    expect(dot(fused)).toBe(fusedHardware() ? 2 ** -11 + 2 ** -24 : 2 ** -11);
    plain.dispose();
    fused.dispose();
  });

  it('matmul, attention, RMSNorm, log-probs, their gradients and AdamW differ from the plain build by rounding only', () => {
    const builds = [false, true].map((fma) => new T.CpuBackend({ threads: 2, minParallelWork: 0, fma }));
    const rng = new T.Rng(5);
    const shapes: Record<string, number[]> = {
      a: [3, 40, 300],
      b: [300, 50],
      q: [2, 17, 2, 16],
      x: [30, 64],
      w: [64],
      l: [20, 100],
    };
    const values = Object.fromEntries(Object.entries(shapes).map(([n, s]) => [n, T.randn(s, rng).dataSync()]));
    const targets = Int32Array.from({ length: 20 }, (_, i) => (i * 13) % 100);
    const [plain, fused] = builds.map((backend) =>
      T.tidy(() => {
        const t = Object.fromEntries(Object.entries(shapes).map(([n, s]) => [n, T.tensor(values[n]!, s, { backend })]));
        const tg = T.tensor(targets, [20], { dtype: 'i32', backend });
        const loss = (p: Record<string, T.Tensor>): T.Tensor =>
          T.add(
            T.add(T.sum(T.square(T.matmul(p.a!, p.b!))), T.sum(T.causalAttention(p.q!, p.q!, p.q!))),
            T.add(T.sum(T.square(T.rmsNorm(p.x!, p.w!))), T.sum(T.tokenLogProbs(p.l!, tg, 1))),
          );
        const [value, grads] = T.valueAndGrad(loss)(t);
        const step = T.adamwStep(t, grads, T.adamwInit(t), { lr: 1e-2 });
        return [value, ...Object.values(grads), ...Object.values(step.params)].map((g) =>
          Float64Array.from(g.dataSync()),
        );
      }),
    );
    let differs = 0;
    for (let i = 0; i < plain!.length; i++) {
      const [p, f] = [plain![i]!, fused![i]!];
      const scale = p.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      for (let j = 0; j < p.length; j++) {
        // Sums of up to 300 f32 products: each build is within 300 u of the exact sum of magnitudes, which the largest
        // entry bounds here (random normal inputs); a wrong kernel misses by far more.
        if (!(Math.abs(p[j]! - f[j]!) <= 300 * 2 ** -24 * scale))
          expect.fail(`output ${i}[${j}]: plain ${p[j]}, fused ${f[j]}`);
        if (p[j] !== f[j]) differs++;
      }
    }
    if (fusedHardware()) expect(differs).toBeGreaterThan(0);
    for (const b of builds) b.dispose();
  });
});
