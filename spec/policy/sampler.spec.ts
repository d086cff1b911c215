import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/core/rng.js';
import { tidy } from '../../src/core/scope.js';
import { liveTensors } from '../../src/core/tensor.js';
import { sampleRollouts, type Rollouts } from '../../src/rl/sampler.js';
import { scoreLogProbs } from '../../src/rl/score.js';
import { chooseToken } from '../../src/core/sampling.js';
import { CpuBackend } from '../../src/backends/cpu/index.js';
import { initParams } from '../../src/nn/transformer.js';
import { tokenizer, tinyConfig, peakedParams } from './helpers/fixtures.js';

const PROMPTS = ['12+34=', '7*8=', '3,5,7:22=', '999+1='];
const config = tinyConfig();
const params = peakedParams(config, 1);

async function both(
  seed: number,
  opts: { temperature?: number; topP?: number; groupSize?: number },
): Promise<[Rollouts, Rollouts]> {
  const common = { maxNewTokens: 12, groupSize: opts.groupSize ?? 3, ...opts };
  const kv = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(seed), { ...common, useKvCache: true });
  const full = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(seed), {
    ...common,
    useKvCache: false,
  });
  return [kv, full];
}

describe('rollout sampler', () => {
  it.each([
    [1, { temperature: 1 }],
    [2, { temperature: 0.7, topP: 0.9 }],
    [3, { temperature: 1.3, topP: 0.5 }],
    [4, { temperature: 0 }],
  ])('KV-cache sampling gives the same tokens and log-probs as full re-runs (seed %i, %o)', async (seed, opts) => {
    const [kv, full] = await both(seed, opts);
    expect(kv.tokens).toEqual(full.tokens);
    expect(kv.attentionMask).toEqual(full.attentionMask);
    expect(kv.completionMask).toEqual(full.completionMask);
    // Bit for bit, not approximately: the cached path computes each position's row with the same ops.
    expect(Array.from(kv.sampledLogProbs)).toEqual(Array.from(full.sampledLogProbs));
  });

  it.each([
    [5, 1],
    [6, 0.8],
    [7, 0],
  ])(
    'the recorded log-probs equal a fresh scoreLogProbs forward: ratio exactly 1 (seed %i, temperature %f)',
    async (seed, temperature) => {
      const ro = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(seed), {
        groupSize: 4,
        maxNewTokens: 10,
        temperature,
        topP: 0.95,
      });
      const fresh = tidy(() => scoreLogProbs(params, config, ro, { temperature: ro.scoringTemperature }));
      const values = fresh.dataSync();
      fresh.dispose();
      for (let i = 0; i < values.length; i++) {
        expect(values[i]).toBe(ro.sampledLogProbs[i]);
        if (ro.completionMask[i]) expect(Math.exp(values[i]! - ro.sampledLogProbs[i]!)).toBe(1);
        else expect(values[i]).toBe(0);
      }
    },
  );

  it('is reproducible for a seed, groups G rows per prompt, stops at EOS and pads after it', async () => {
    const a = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(11), { groupSize: 5, maxNewTokens: 12 });
    const b = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(11), { groupSize: 5, maxNewTokens: 12 });
    const c = await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(12), { groupSize: 5, maxNewTokens: 12 });
    expect(a.tokens).toEqual(b.tokens);
    expect(a.completions).toEqual(b.completions);
    expect(a.tokens).not.toEqual(c.tokens);
    expect(a.batchSize).toBe(20);
    expect(a.promptIndex).toEqual([0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3]);
    const t = a.promptLen + a.completionLen;
    for (let r = 0; r < a.batchSize; r++) {
      const comp = Array.from(a.tokens.subarray(r * t + a.promptLen, (r + 1) * t));
      const len = a.completionLengths[r]!;
      expect(a.completionMask.subarray(r * a.completionLen, (r + 1) * a.completionLen).reduce((s, m) => s + m, 0)).toBe(
        len,
      );
      const eosAt = comp.indexOf(tokenizer.eos);
      if (a.finished[r]) expect(eosAt).toBe(len - 1);
      else expect(len).toBe(12);
      expect(comp.slice(len).every((id) => id === tokenizer.pad)).toBe(true);
      expect(a.completions[r]).toBe(tokenizer.decode(comp.slice(0, a.finished[r] ? len - 1 : len)));
      // The prompt is left-padded and starts with BOS.
      const prompt = Array.from(a.tokens.subarray(r * t, r * t + a.promptLen)).filter((id) => id !== tokenizer.pad);
      expect(prompt).toEqual([tokenizer.bos, ...tokenizer.encode(PROMPTS[a.promptIndex[r]!]!)]);
    }
  });

  /** A CPU backend that counts its GEMMs' flops. */
  class CountingCpu extends CpuBackend {
    flops = 0;
    override launch(name: string, args: readonly number[], work: number): void {
      if (name === 'gemm') this.flops += work;
      super.launch(name, args, work);
    }
  }

  it('drops finished rows from the decode batch where the backend is batch-invariant: fewer flops, same rollouts', async () => {
    const invariant = new CountingCpu({ threads: 1 });
    // The same backend claiming no batch invariance: every row is computed to the last step.
    const plain = new CountingCpu({ threads: 1 });
    Object.defineProperty(plain, 'batchInvariant', { value: false });
    const prompts = Array.from({ length: 24 }, (_, i) => `${i}+${(i * 7) % 10}=`);
    const [a, b] = (await Promise.all(
      [invariant, plain].map((backend) =>
        sampleRollouts(initParams(config, new Rng(3), { std: 0.5, backend }), config, tokenizer, prompts, new Rng(8), {
          maxNewTokens: 12,
          temperature: 1,
        }),
      ),
    )) as [Rollouts, Rollouts];
    // Rows that ended before the last step (else there is nothing to drop).
    expect(a.completionLengths.filter((n) => n < a.completionLen).length).toBeGreaterThan(6);
    expect(a.tokens).toEqual(b.tokens);
    expect(a.completionMask).toEqual(b.completionMask);
    expect(Array.from(a.sampledLogProbs)).toEqual(Array.from(b.sampledLogProbs));
    expect(invariant.flops).toBeLessThan(plain.flops);
    invariant.dispose();
    plain.dispose();
  });

  it("runs a prompt's forward once for its G rows where the backend is batch-invariant, with the same results", async () => {
    const backend = new CountingCpu({ threads: 1 });
    const counted = initParams(config, new Rng(1), { std: 0.5, backend });
    const sample = async (prompts: readonly string[], groupSize: number): Promise<[Rollouts, number]> => {
      const before = backend.flops;
      const ro = await sampleRollouts(counted, config, tokenizer, prompts, new Rng(21), { groupSize, maxNewTokens: 1 });
      return [ro, backend.flops - before];
    };
    // Each prompt 6 times as a group, and as 6 prompts of one row each: the same rows in the same order.
    const [grouped, groupedFlops] = await sample(PROMPTS, 6);
    const [single, singleFlops] = await sample(
      PROMPTS.flatMap((p) => Array.from({ length: 6 }, () => p)),
      1,
    );
    expect(grouped.tokens).toEqual(single.tokens);
    expect(Array.from(grouped.sampledLogProbs)).toEqual(Array.from(single.sampledLogProbs));
    // One new token: the forward over the prompts and one LM head. Run once per prompt, the forward's GEMMs are a
    // sixth of the 24 rows' (the LM head, on all 24 rows either way, is the rest).
    const head = 2 * 24 * config.dModel * config.vocabSize;
    expect(groupedFlops - head).toBe((singleFlops - head) / 6);
    backend.dispose();
  });

  it('frees every tensor it creates', async () => {
    await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(13), { groupSize: 2, maxNewTokens: 4 });
    const before = liveTensors();
    await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(14), { groupSize: 2, maxNewTokens: 8 });
    await sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(14), {
      groupSize: 2,
      maxNewTokens: 8,
      useKvCache: false,
    });
    expect(liveTensors()).toBe(before);
  });

  it('rejects prompts that cannot fit maxNewTokens in the context', async () => {
    await expect(sampleRollouts(params, config, tokenizer, PROMPTS, new Rng(1), { maxNewTokens: 30 })).rejects.toThrow(
      /maxSeqLen/,
    );
  });
});

describe('chooseToken, fed one uniform draw per token', () => {
  const probs = [0.5, 0.25, 0.15, 0.1];
  const lp = Float32Array.from(probs.map(Math.log));
  const sample = (rng: Rng, topP: number): number => chooseToken(lp, 0, 4, rng.uniform(), false, topP);

  it('samples each token with its probability', () => {
    const rng = new Rng(1);
    const counts = [0, 0, 0, 0];
    const n = 40_000;
    for (let i = 0; i < n; i++) counts[sample(rng, 1)]!++;
    // 5 standard deviations of a binomial count.
    counts.forEach((c, i) =>
      expect(Math.abs(c / n - probs[i]!)).toBeLessThan(5 * Math.sqrt((probs[i]! * (1 - probs[i]!)) / n)),
    );
  });

  it('keeps the smallest nucleus whose mass reaches top-p, renormalised', () => {
    const rng = new Rng(2);
    const counts = [0, 0, 0, 0];
    const n = 30_000;
    for (let i = 0; i < n; i++) counts[sample(rng, 0.7)]!++;
    expect(counts[2]).toBe(0);
    expect(counts[3]).toBe(0);
    expect(Math.abs(counts[0]! / n - 2 / 3)).toBeLessThan(0.015);
    const once = [0, 0, 0, 0];
    for (let i = 0; i < 1000; i++) once[sample(rng, 0.4)]!++;
    expect(once).toEqual([1000, 0, 0, 0]);
  });

  // That greedy sampling draws nothing from the generator is the sampler's part (sampler-readback.spec.ts).
  it('is greedy: the first argmax, whatever the draw', () => {
    const tied = Float32Array.from([-3, -0.5, -2, -0.5]);
    for (const u of [0, 0.5, 1 - 2 ** -32]) expect(chooseToken(tied, 0, 4, u, true, 1)).toBe(1);
  });
});
