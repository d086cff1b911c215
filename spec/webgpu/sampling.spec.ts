import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { initParams, smallConfig } from '../../src/nn/index.js';
import { sampleRollouts } from '../../src/rl/index.js';
import { additionTask, tokenizerFor, type Tokenizer } from '../../src/tasks/index.js';
import { cpu, describeGpu } from './helpers.js';

/**
 * `sampleTokens` on the GPU (shaders/sample_tokens.wgsl) against the reference kernel (f64, `chooseToken`): the
 * same ids on random rows of log-probs (many seeds, several topP, V from 1 to Qwen3's 151,936, up to 16 rows),
 * except where a draw lies within the GPU's stated error of a CDF boundary. That margin is computed here on the
 * host from the shader's error statement: each p = exp(lp) within (3 + 2 |lp|) ULP (WGSL's bound for f32 exp, and
 * 2^-126 for a flushed subnormal), each p truncated to the fixed point's unit (below 2^-frac of twice the largest
 * p), u and topP rounded to f32 (half an f32 ULP each), floor(x * mass) one unit, and the host's own f64 sums.
 * Only those draws are skipped, and the specs count them and assert they are rare. Greedy is exact everywhere.
 */

const F32_ULP = 2 ** -23;

/** B rows of log-probs over V tokens, f32: sigma N(0, 1) logits (on a grid of 1/4 with `ties`), log-softmaxed. */
function logProbRows(rng: T.Rng, b: number, v: number, sigma: number, ties = false): Float32Array {
  const out = new Float32Array(b * v);
  const logits = new Float64Array(v);
  for (let r = 0; r < b; r++) {
    let m = -Infinity;
    for (let i = 0; i < v; i++) {
      const x = sigma * rng.normal();
      logits[i] = ties ? Math.round(x * 4) / 4 : x;
      m = Math.max(m, logits[i]!);
    }
    let s = 0;
    for (let i = 0; i < v; i++) s += Math.exp(logits[i]! - m);
    const logS = Math.log(s);
    for (let i = 0; i < v; i++) out[r * v + i] = logits[i]! - m - logS;
  }
  return out;
}

/** The host's order of a row (chooseToken's): ids by (p descending, id ascending) for topP < 1, else by id. */
function hostOrder(p: Float64Array, topP: number): number[] {
  const order = Array.from({ length: p.length }, (_, i) => i);
  if (topP < 1) order.sort((a, b) => p[b]! - p[a]! || a - b);
  return order;
}

type Verdict = 'clear' | 'near' | 'order';

/**
 * Whether the GPU may pick another id than the host for this row and draw: 'near' when u * kept mass (or
 * topP * total, which sets the nucleus' size) lies within the error bound of a cumulative mass of the order;
 * 'order' when the host's order by f64 p is not the GPU's order by lp (never expected: it would need two
 * distinct f32 log-probs with one f64 probability).
 */
function verdict(lp: Float32Array, offset: number, v: number, u: number, topP: number): Verdict {
  const p = new Float64Array(v);
  const err = new Float64Array(v);
  let pmax = 0;
  for (let i = 0; i < v; i++) {
    const x = lp[offset + i]!;
    p[i] = Math.exp(x);
    err[i] = (3 + 2 * Math.abs(x)) * F32_ULP * p[i]! + 2 ** -126;
    pmax = Math.max(pmax, p[i]!);
  }
  const frac = 62 - (32 - Math.clz32(v - 1));
  const unit = 2 * pmax * 2 ** -frac;
  const host = (v + 8) * 2 ** -52; // the host's f64 exp and sums, relative
  const order = hostOrder(p, topP);
  for (let k = 1; k < v && topP < 1; k++) {
    const [a, b] = [lp[offset + order[k - 1]!]!, lp[offset + order[k]!]!];
    if (a < b || (a === b && order[k - 1]! > order[k]!)) return 'order';
  }
  // Is x (known within xErr) within the error of a cumulative mass of the first n tokens of the order?
  const nearPrefix = (n: number, x: number, xErr: number): boolean => {
    let cum = 0;
    let cumErr = 0;
    for (let k = 0; k < n; k++) {
      cum += p[order[k]!]!;
      cumErr += err[order[k]!]! + unit;
      if (Math.abs(cum - x) <= cumErr + xErr + host * (cum + x)) return true;
    }
    return false;
  };
  let total = 0;
  let totalErr = 0;
  for (let i = 0; i < v; i++) {
    total += p[i]!;
    totalErr += err[i]! + unit;
  }
  let kept = v;
  if (topP < 1) {
    const goal = topP * total;
    if (nearPrefix(v, goal, 2 ** -24 * goal + topP * totalErr + unit)) return 'near';
    let mass = 0;
    kept = 0;
    while (kept < v && (kept === 0 || mass < goal)) mass += p[order[kept++]!]!;
  }
  let mass = 0;
  let massErr = 0;
  for (let k = 0; k < kept; k++) {
    mass += p[order[k]!]!;
    massErr += err[order[k]!]! + unit;
  }
  const thr = u * mass;
  return nearPrefix(kept, thr, 2 ** -24 * thr + u * massErr + unit) ? 'near' : 'clear';
}

interface Tally {
  compared: number;
  near: number;
  order: number;
}

/** Both backends on the same rows and draws; each clear row must agree, and every chosen log-prob is lp[id]. */
async function compareRows(
  gpu: T.Backend,
  lp: Float32Array,
  b: number,
  v: number,
  draws: Float64Array,
  opts: { greedy: boolean; topP: number },
  tally: Tally,
): Promise<void> {
  const run = async (backend: T.Backend, dtype: 'f32' | 'f64'): Promise<[Int32Array, Float32Array]> => {
    const out = T.tidy(() =>
      T.sampleTokens(T.tensor(lp, [b, v], { backend }), T.tensor(draws, [b], { dtype, backend }), opts),
    );
    const ids = (await out.ids.data()) as Int32Array;
    const chosen = Float32Array.from(await out.logProbs.data());
    T.dispose(out);
    return [ids, chosen];
  };
  const [want, wantLp] = await run(cpu, 'f64');
  const [got, gotLp] = await run(gpu, 'f32');
  for (let r = 0; r < b; r++) {
    expect(got[r]).toBeGreaterThanOrEqual(0);
    expect(got[r]).toBeLessThan(v);
    expect(gotLp[r]).toBe(lp[r * v + got[r]!]);
    expect(wantLp[r]).toBe(lp[r * v + want[r]!]);
    const why = opts.greedy ? 'clear' : verdict(lp, r * v, v, draws[r]!, opts.topP);
    if (why === 'near') tally.near++;
    else if (why === 'order') tally.order++;
    else {
      tally.compared++;
      if (got[r] !== want[r])
        throw new Error(`row ${r} (V ${v}, ${JSON.stringify(opts)}, u ${draws[r]}): gpu ${got[r]}, host ${want[r]}`);
    }
  }
}

const uniforms = (rng: T.Rng, b: number): Float64Array => Float64Array.from({ length: b }, () => rng.uniform());

describeGpu('webgpu sampleTokens', (gpu) => {
  it('greedy: the first argmax of every row, ties to the lowest id (V 1 to 151,936)', async () => {
    const tally: Tally = { compared: 0, near: 0, order: 0 };
    for (const [seed, b, v] of [
      [1, 1, 1],
      [2, 3, 2],
      [3, 16, 7],
      [4, 5, 257],
      [5, 16, 1000],
      [6, 16, 151_936],
    ] as const) {
      const rng = new T.Rng(seed);
      for (const ties of [false, true]) {
        const lp = logProbRows(rng, b, v, ties ? 0.5 : 3, ties);
        await compareRows(gpu, lp, b, v, uniforms(rng, b), { greedy: true, topP: 1 }, tally);
      }
    }
    expect(tally.compared).toBe(2 * (1 + 3 + 16 + 5 + 16 + 16));
  });

  it('sampling, V up to 9000 (every workgroup size), topP 1 to 0.1, tied log-probs: the reference ids off the margin', async () => {
    const tally: Tally = { compared: 0, near: 0, order: 0 };
    for (let seed = 0; seed < 36; seed++) {
      const rng = new T.Rng(100 + seed);
      // Workgroups of 8 (V <= 512), 16, 32, 64, 128 and 256 threads (kernels/sampling.ts).
      const v = [2, 7, 64, 300, 1000, 1500, 2500, 5000, 9000][seed % 9]!;
      const b = 1 + (seed % 16);
      const sigma = [1, 3, 6][seed % 3]!;
      for (const ties of [false, true]) {
        const lp = logProbRows(rng, b, v, sigma, ties);
        for (const topP of [1, 0.95, 0.9, 0.5, 0.1])
          await compareRows(gpu, lp, b, v, uniforms(rng, b), { greedy: false, topP }, tally);
      }
    }
    console.log(`sampleTokens, V <= 9000: ${tally.compared} rows compared, ${tally.near} within the margin`);
    expect(tally.order).toBe(0);
    expect(tally.compared).toBeGreaterThan(2000);
    expect(tally.near).toBeLessThan(0.01 * tally.compared);
  });

  it('sampling at V = 151,936 (Qwen3), 16 rows: the reference ids off the margin', async () => {
    const tally: Tally = { compared: 0, near: 0, order: 0 };
    const v = 151_936;
    for (let seed = 0; seed < 3; seed++) {
      const rng = new T.Rng(200 + seed);
      const lp = logProbRows(rng, 16, v, [4, 6, 8][seed]!);
      for (const topP of [1, 0.9, 0.5])
        await compareRows(gpu, lp, 16, v, uniforms(rng, 16), { greedy: false, topP }, tally);
    }
    console.log(`sampleTokens, V = ${v}: ${tally.compared} rows compared, ${tally.near} within the margin`);
    expect(tally.order).toBe(0);
    expect(tally.near).toBeLessThan(0.1 * (tally.compared + tally.near));
  }, 300_000);

  it('draws at the ends of [0, 1) (u = 1 - 2^-32 is 1 in f32: the fallback to the last token of the order)', async () => {
    for (const [seed, b, v] of [
      [1, 4, 9],
      [2, 16, 64],
      [3, 8, 1000],
    ] as const) {
      const lp = logProbRows(new T.Rng(seed), b, v, 1);
      for (const u of [0, 1 - 2 ** -32])
        for (const topP of [1, 0.9, 0.5]) {
          const draws = new Float64Array(b).fill(u);
          // No margin here: every p of these rows is far above u's distance to 0 or 1 times the mass.
          const [want, got] = await Promise.all([cpu, gpu].map((backend) => idsOf(backend, lp, b, v, draws, topP)));
          expect(Array.from(got!)).toEqual(Array.from(want!));
        }
    }
  });

  it('the sampler on the GPU reads back 2 numbers per row and token, 2 B 4 bytes, in one read-back per token, at V = 64 and at V = 4096', async () => {
    const base = tokenizerFor(additionTask());
    // No stop id: every row runs maxNewTokens.
    const tokenizer: Tokenizer = {
      vocabSize: base.vocabSize,
      bos: base.bos,
      pad: base.pad,
      eos: -1,
      stopIds: [],
      promptIds: (prompt) => base.promptIds(prompt),
      encode: (text) => base.encode(text),
      decode: (ids) => ids.join(' '),
    };
    for (const vocab of [64, 4096]) {
      const config = smallConfig(vocab, { dModel: 16, nLayers: 1, nHeads: 2, nKvHeads: 1, dFf: 16, maxSeqLen: 32 });
      const params = initParams(config, new T.Rng(1), { backend: gpu, std: 0.5 });
      for (const [temperature, topP] of [
        [1, 1],
        [0.7, 0.5],
        [0, 1],
      ] as const) {
        const before = T.readBackBytes(gpu);
        const readBacks = gpu.stats().readBacks;
        const ro = await sampleRollouts(params, config, tokenizer, ['12+34=', '5+6='], new T.Rng(2), {
          groupSize: 3,
          maxNewTokens: 5,
          temperature,
          topP,
        });
        expect(ro.completionLen).toBe(5);
        expect((T.readBackBytes(gpu) - before) / 5).toBe(2 * ro.batchSize * 4);
        // The ids and the log-probs of a token are asked for in one turn: one wait for the device per token.
        expect(gpu.stats().readBacks - readBacks, 'read-backs for 5 tokens').toBe(5);
      }
      T.dispose(params);
    }
  });
});

/** The GPU's or the reference's ids for rows and draws. */
async function idsOf(
  backend: T.Backend,
  lp: Float32Array,
  b: number,
  v: number,
  draws: Float64Array,
  topP: number,
): Promise<Int32Array> {
  const dtype = backend === cpu ? 'f64' : 'f32';
  const out = T.tidy(() =>
    T.sampleTokens(T.tensor(lp, [b, v], { backend }), T.tensor(draws, [b], { dtype, backend }), { topP }),
  );
  const ids = (await out.ids.data()) as Int32Array;
  T.dispose(out);
  return ids;
}
