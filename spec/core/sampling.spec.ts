import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { chooseToken } from '../../src/core/sampling.js';

/**
 * `sampleTokens` on the host backends is the host's token choice given the same draws: the same ids, bit for
 * bit, as the host's `pickToken` had them before the sampler moved the choice to the backend (`pickTokenAsBefore`,
 * its code at d765bfc) and as `chooseToken` (the definition) has them now, on random rows (many seeds; V from 1 to Qwen3's 151,936;
 * topP 1 to 0.1; greedy; tied log-probs, masked tokens at -Infinity, draws at both ends of [0, 1)). The CPU
 * backend runs the reference kernel through its fallback, in place on its WebAssembly memory.
 */

/** src/rl/sampling.ts's pickToken at d765bfc, verbatim: the definition the kernels must keep. */
function pickTokenAsBefore(
  logProbs: ArrayLike<number>,
  offset: number,
  vocab: number,
  rng: T.Rng,
  greedy: boolean,
  topP: number,
): number {
  if (greedy) {
    let best = 0;
    for (let i = 1; i < vocab; i++) if (logProbs[offset + i]! > logProbs[offset + best]!) best = i;
    return best;
  }
  const probs = new Float64Array(vocab);
  for (let i = 0; i < vocab; i++) probs[i] = Math.exp(logProbs[offset + i]!);
  const order = Array.from({ length: vocab }, (_, i) => i);
  let kept = vocab;
  if (topP < 1) {
    // The smallest set of most likely tokens whose mass reaches topP (ties broken by id, for determinism).
    order.sort((a, b) => probs[b]! - probs[a]! || a - b);
    const total = probs.reduce((s, p) => s + p, 0);
    let mass = 0;
    kept = 0;
    while (kept < vocab && (kept === 0 || mass < topP * total)) mass += probs[order[kept++]!]!;
  }
  let mass = 0;
  for (let k = 0; k < kept; k++) mass += probs[order[k]!]!;
  const u = rng.uniform() * mass;
  let cum = 0;
  for (let k = 0; k < kept; k++) {
    cum += probs[order[k]!]!;
    if (cum > u) return order[k]!;
  }
  // Rounding left u at the very top: the last token with any mass.
  for (let k = kept - 1; k >= 0; k--) if (probs[order[k]!]! > 0) return order[k]!;
  return order[0]!;
}

/** Rows of f32 log-probs: sigma N(0, 1) logits (on a grid of 1/2 with `ties`; a few at -Infinity with `masked`). */
function logProbRows(rng: T.Rng, b: number, v: number, sigma: number, ties: boolean, masked: boolean): Float32Array {
  const out = new Float32Array(b * v);
  for (let r = 0; r < b; r++) {
    const x = Array.from({ length: v }, (_, i) => {
      if (masked && i % 5 === 1) return -Infinity;
      const z = sigma * rng.normal();
      return ties ? Math.round(z * 2) / 2 : z;
    });
    const m = x.reduce((a, y) => Math.max(a, y), -Infinity);
    const logS = Math.log(x.reduce((s, y) => s + Math.exp(y - m), 0));
    x.forEach((y, i) => {
      out[r * v + i] = y - m - logS;
    });
  }
  return out;
}

const BACKENDS: [string, () => T.Backend][] = [
  ['reference', () => new T.ReferenceBackend()],
  ['cpu', () => new T.CpuBackend({ threads: 1 })],
];

describe.each(BACKENDS)('sampleTokens on %s', (_, make) => {
  const backend = make();

  /** The op's ids and log-probs against the host's choice then (an Rng in the same state) and now (the draws). */
  function check(lp: Float32Array, b: number, v: number, seed: number, greedy: boolean, topP: number): void {
    const draws = new T.Rng(seed);
    const u = Float64Array.from({ length: b }, () => (greedy ? 0 : draws.uniform()));
    const out = T.sampleTokens(T.tensor(lp, [b, v], { backend }), T.tensor(u, [b], { dtype: 'f64', backend }), {
      greedy,
      topP,
    });
    const ids = out.ids.dataSync();
    const chosen = out.logProbs.dataSync();
    T.dispose(out);
    const before = new T.Rng(seed);
    for (let r = 0; r < b; r++) {
      const want = pickTokenAsBefore(lp, r * v, v, before, greedy, topP);
      expect(ids[r]).toBe(want);
      expect(chooseToken(lp, r * v, v, u[r]!, greedy, topP)).toBe(want);
      expect(chosen[r]).toBe(lp[r * v + want]);
    }
  }

  it("gives the host's ids on random rows: V 1 to 1000, topP 1 to 0.1, greedy, ties, masked tokens", () => {
    for (let seed = 0; seed < 60; seed++) {
      const rng = new T.Rng(seed);
      const v = [1, 2, 7, 64, 300, 1000][seed % 6]!;
      const b = 1 + (seed % 16);
      const lp = logProbRows(rng, b, v, [0.5, 2, 6][seed % 3]!, seed % 2 === 0, seed % 4 === 1 && v > 2);
      for (const topP of [1, 0.95, 0.5, 0.1]) for (const greedy of [false, true]) check(lp, b, v, seed, greedy, topP);
    }
  });

  it("gives the host's ids at Qwen3's vocabulary, 151,936", () => {
    const v = 151_936;
    const lp = logProbRows(new T.Rng(7), 2, v, 4, false, false);
    for (const topP of [1, 0.9]) check(lp, 2, v, 8, false, topP);
    check(lp, 2, v, 9, true, 1);
  });

  it('draws at the ends of [0, 1): the first and the last token with mass of the order', () => {
    const v = 9;
    const lp = logProbRows(new T.Rng(3), 1, v, 1, false, true); // ids 1 and 6 at -Infinity
    const p = Array.from(lp, Math.exp);
    for (const topP of [1, 0.6]) {
      // The order: by id, or by p descending within the smallest prefix holding topP of the mass.
      const order = Array.from({ length: v }, (_, i) => i).filter((i) => p[i]! > 0);
      if (topP < 1) {
        order.sort((a, b) => p[b]! - p[a]!);
        let [kept, mass] = [0, 0];
        while (mass < topP) mass += p[order[kept++]!]!;
        order.splice(kept);
        expect(order.length).toBeGreaterThan(1);
        expect(order.length).toBeLessThan(7);
      }
      for (const [u, want] of [
        [0, order[0]],
        [1 - 2 ** -32, order[order.length - 1]],
      ] as const) {
        const draws = T.tensor([u], [1], { dtype: 'f64', backend });
        const out = T.sampleTokens(T.tensor(lp, [1, v], { backend }), draws, { topP });
        expect(out.ids.dataSync()[0]).toBe(want);
        T.dispose(out);
      }
    }
  });

  it('refuses bad shapes, dtypes and topP, and a gradient through it', () => {
    const lp = T.tensor([-1, -0.5, -2, -3], [2, 2], { backend });
    const d = T.tensor([0.5, 0.5], [2], { backend });
    expect(() => T.sampleTokens(T.reshape(lp, [2, 1, 2]), d)).toThrow(T.ShapeError);
    expect(() => T.sampleTokens(lp, T.tensor([0.5], [1], { backend }))).toThrow(T.ShapeError);
    expect(() => T.sampleTokens(lp, T.tensor([0, 0], [2], { dtype: 'i32', backend }))).toThrow(T.DTypeError);
    expect(() => T.sampleTokens(T.tensor([1, 2], [2, 1], { dtype: 'i32', backend }), d)).toThrow(T.DTypeError);
    for (const topP of [0, 1.5, Number.NaN]) expect(() => T.sampleTokens(lp, d, { topP })).toThrow(T.ArgumentError);
    expect(() => T.grad((x: T.Tensor) => T.sum(T.sampleTokens(x, d).logProbs))(lp)).toThrow(T.NotDifferentiableError);
  });
});

describe('sampleTokens on cpu', () => {
  it('runs the reference kernel through the fallback, counted', () => {
    const cpu = new T.CpuBackend({ threads: 1 });
    const out = T.sampleTokens(T.tensor([-1, -0.5], [1, 2], { backend: cpu }), T.tensor([0.2], [1], { backend: cpu }));
    expect(T.fallbackCounts(cpu).sampleTokens).toBe(1);
    T.dispose(out);
    cpu.dispose();
  });
});
