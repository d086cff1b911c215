/**
 * Gradient variance with and without RCC (the BICC paper reports RCC cutting it by about a third).
 *
 * At a given policy: sample one batch (P prompts x G rollouts, with pi_old's and pi_ref's log-probs), split its
 * groups into M minibatches of whole groups, and compute each minibatch's policy gradient (all parameters,
 * flattened) of the GRPO loss, once with GRPO's group-normalised advantages and once with RCC's (same rollouts,
 * same minibatches: the estimators are paired, only the baseline differs). The spread is the trace of the
 * covariance of the M gradients, (1/(M-1)) sum_m ||g_m - mean g||^2.
 *
 * Two estimators are measured: the trainer's (on-policy GRPO gradient, sum_i A_i grad log pi(o_i), what a run
 * with `advantage: 'rcc'` computes), and the importance-weighted one RCC's derivation assumes,
 * sum_i w_i A_i grad log pi(o_i) with w = exp(delta) (normalised to mean 1 within each group, which leaves
 * both baselines unchanged), delta = log pi_old(o) - log pi_ref(o). Beside RCC with the trainer's delta (the
 * sum over tokens) come two diagnostics: RCC with the length-normalised delta (`mean`, a smaller delta, where
 * the first-order expansion is more accurate), and, for the weighted estimator, the exact variance-minimising
 * constant baseline b* = sum w^2 r / sum w^2 that RCC approximates.
 */
import * as E from 'fp-ts/lib/Either.js';
import {
  grad,
  objectives,
  sampleProblems,
  sampleRollouts,
  scoreLogProbs,
  scoreRollouts,
  selectRows,
  selectRowValues,
  tensor,
  tidy,
  dispose,
  treeLeaves,
  type Problem,
  type Rng,
  type Task,
  type Tokenizer,
  type TransformerConfig,
  type TransformerParams,
} from '../../src/index.js';

/** Running sum of vectors and of their squared norms: enough for the trace of the covariance. */
export class TraceAccumulator {
  private sum: Float64Array | null = null;
  private sqNorms = 0;
  private n = 0;

  add(g: ArrayLike<number>): void {
    if (this.sum === null) this.sum = new Float64Array(g.length);
    if (g.length !== this.sum.length) throw new Error(`vector of length ${g.length}, expected ${this.sum.length}`);
    let sq = 0;
    for (let i = 0; i < g.length; i++) {
      const x = g[i]!;
      this.sum[i]! += x;
      sq += x * x;
    }
    this.sqNorms += sq;
    this.n++;
  }

  get count(): number {
    return this.n;
  }

  /** ||mean g||^2. */
  meanSquaredNorm(): number {
    if (!this.sum || this.n === 0) return NaN;
    let s = 0;
    for (const x of this.sum) s += (x / this.n) ** 2;
    return s;
  }

  /** tr Cov = (1/(n-1)) sum ||g - mean||^2 = (sum ||g||^2 - n ||mean||^2) / (n - 1). */
  traceCovariance(): number {
    if (this.n < 2) return NaN;
    return Math.max(0, (this.sqNorms - this.n * this.meanSquaredNorm()) / (this.n - 1));
  }
}

/** The same trace computed directly from the vectors (two passes): the reference the accumulator is tested against. */
export function traceCovarianceOf(vectors: readonly (readonly number[])[]): number {
  const n = vectors.length;
  const d = vectors[0]!.length;
  const mean = Array.from({ length: d }, (_, j) => vectors.reduce((s, v) => s + v[j]!, 0) / n);
  return vectors.reduce((s, v) => s + v.reduce((t, x, j) => t + (x - mean[j]!) ** 2, 0), 0) / (n - 1);
}

export interface EstimatorStats {
  /** tr Cov of the minibatch gradients. */
  readonly trace: number;
  /** ||mean gradient||^2 (the signal the noise is compared with). */
  readonly meanSquaredNorm: number;
}

export interface VarianceMeasurement {
  readonly minibatches: number;
  readonly groupsPerMinibatch: number;
  readonly rollouts: number;
  readonly reward: number;
  /** Fraction of groups with both correct and incorrect rollouts (the others have zero advantages). */
  readonly mixedGroups: number;
  /** Mean |delta| and its within-group std (how far pi_old is from pi_ref on the sampled rollouts). */
  readonly meanAbsDelta: number;
  readonly withinGroupDeltaStd: number;
  /** Pooled within-group correlation of reward and delta (the quantity RCC's correction is built on). */
  readonly rewardDeltaCorrelation: number;
  /** Mean |b_RCC - mean r| over mixed groups. */
  readonly meanBaselineShift: number;
  readonly grpo: EstimatorStats;
  readonly rcc: EstimatorStats;
  /** RCC with delta = the per-token mean of the log-ratio (`rccDelta: 'mean'`). */
  readonly rccMean: EstimatorStats;
  readonly weightedGrpo: EstimatorStats;
  readonly weightedRcc: EstimatorStats;
  /** The weighted estimator with the exact b* = sum w^2 r / sum w^2 per group. */
  readonly weightedOptimal: EstimatorStats;
}

/** Advantages (r - b) / (std + 1e-6) with a per-group baseline b, 0 for groups whose rewards are all equal (as RCC's). */
export function baselineAdvantages(
  rewards: readonly number[],
  groupIds: readonly number[],
  baseline: (rows: readonly number[]) => number,
): number[] {
  const out = new Array<number>(rewards.length).fill(0);
  const members = new Map<number, number[]>();
  groupIds.forEach((g, i) => members.set(g, [...(members.get(g) ?? []), i]));
  for (const idx of members.values()) {
    const r = idx.map((i) => rewards[i]!);
    const mr = mean(r);
    const ss = r.reduce((t, x) => t + (x - mr) ** 2, 0);
    if (ss === 0) continue;
    const b = baseline(idx);
    const sigma = Math.sqrt(ss / r.length);
    idx.forEach((i) => (out[i] = (rewards[i]! - b) / (sigma + 1e-6)));
  }
  return out;
}

export interface VarianceOptions {
  readonly prompts: number;
  readonly groupSize: number;
  readonly groupsPerMinibatch: number;
  readonly maxNewTokens: number;
  readonly temperature: number;
}

const mean = (xs: readonly number[]): number => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);

/** Per-group weights exp(delta) normalised to mean 1 in the group (max-shifted for overflow). */
export function groupNormalisedWeights(deltas: readonly number[], groupIds: readonly number[]): number[] {
  const out = new Array<number>(deltas.length).fill(1);
  const members = new Map<number, number[]>();
  groupIds.forEach((g, i) => members.set(g, [...(members.get(g) ?? []), i]));
  for (const idx of members.values()) {
    const dmax = Math.max(...idx.map((i) => deltas[i]!));
    const w = idx.map((i) => Math.exp(deltas[i]! - dmax));
    const mw = mean(w);
    idx.forEach((i, k) => (out[i] = w[k]! / mw));
  }
  return out;
}

/** Pooled within-group Pearson correlation of x and y (0 when either has no within-group spread). */
export function withinGroupCorrelation(
  x: readonly number[],
  y: readonly number[],
  groupIds: readonly number[],
): number {
  const members = new Map<number, number[]>();
  groupIds.forEach((g, i) => members.set(g, [...(members.get(g) ?? []), i]));
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const idx of members.values()) {
    const mx = mean(idx.map((i) => x[i]!));
    const my = mean(idx.map((i) => y[i]!));
    for (const i of idx) {
      sxy += (x[i]! - mx) * (y[i]! - my);
      sxx += (x[i]! - mx) ** 2;
      syy += (y[i]! - my) ** 2;
    }
  }
  return sxx > 0 && syy > 0 ? sxy / Math.sqrt(sxx * syy) : 0;
}

export async function measureGradientVariance(
  params: TransformerParams,
  reference: TransformerParams,
  config: TransformerConfig,
  tokenizer: Tokenizer,
  task: Task<Problem>,
  rng: Rng,
  opts: VarianceOptions,
): Promise<VarianceMeasurement> {
  if (opts.prompts % opts.groupsPerMinibatch !== 0)
    throw new Error(`prompts ${opts.prompts} must be a multiple of groupsPerMinibatch ${opts.groupsPerMinibatch}`);
  const problems = sampleProblems(task, opts.prompts, rng);
  const ro = await sampleRollouts(
    params,
    config,
    tokenizer,
    problems.map((p) => p.prompt),
    rng,
    {
      groupSize: opts.groupSize,
      maxNewTokens: opts.maxNewTokens,
      temperature: opts.temperature,
    },
  );
  const scores = await scoreRollouts({ sampler: params, reference }, config, ro, null);
  const [old, ref] = [scores.old, scores.reference!];
  const rewards = ro.completions.map((c, r) => task.verify(c, problems[ro.promptIndex[r]!]!));
  const groupIds = ro.promptIndex;
  const deltas = objectives.sequenceDeltas(old, ref, ro.completionMask, ro.completionLen, 'sum');
  const grpoAdv = objectives.groupAdvantages(rewards, groupIds, objectives.PAPER_ADVANTAGES);
  const meanDeltas = objectives.sequenceDeltas(old, ref, ro.completionMask, ro.completionLen, 'mean');
  const rccAdv = objectives.rccAdvantages(rewards, deltas, groupIds);
  const w = groupNormalisedWeights(deltas, groupIds);
  const optimalAdv = baselineAdvantages(rewards, groupIds, (idx) =>
    objectives.optimalBaseline(
      idx.map((i) => rewards[i]!),
      idx.map((i) => deltas[i]!),
    ),
  );
  const names = ['grpo', 'rcc', 'rccMean', 'weightedGrpo', 'weightedRcc', 'weightedOptimal'] as const;
  type Name = (typeof names)[number];
  const estimators: Record<Name, readonly number[]> = {
    grpo: grpoAdv,
    rcc: rccAdv,
    rccMean: objectives.rccAdvantages(rewards, meanDeltas, groupIds),
    weightedGrpo: grpoAdv.map((a, i) => a * w[i]!),
    weightedRcc: rccAdv.map((a, i) => a * w[i]!),
    weightedOptimal: optimalAdv.map((a, i) => a * w[i]!),
  };
  const acc = Object.fromEntries(names.map((k) => [k, new TraceAccumulator()])) as Record<Name, TraceAccumulator>;

  const objective = objectives.makeObjective('grpo', {});
  if (E.isLeft(objective)) throw objective.left;
  const g = opts.groupSize;
  const c = ro.completionLen;
  for (let start = 0; start < opts.prompts; start += opts.groupsPerMinibatch) {
    const rows = Array.from({ length: opts.groupsPerMinibatch * g }, (_, k) => start * g + k);
    const batch = selectRows(ro, rows);
    for (const name of names) {
      const adv = estimators[name];
      const grads = tidy(() => {
        const on = { dtype: params.embed.weight.dtype, backend: params.embed.weight.backend };
        const shape = [rows.length, c];
        const oldRows = tensor(selectRowValues(old, c, rows), shape, on);
        const mask = tensor(batch.completionMask, shape, on);
        const loss = (p: TransformerParams) =>
          objective.right.loss({
            logProbs: scoreLogProbs(p, config, batch, { temperature: ro.scoringTemperature }),
            oldLogProbs: oldRows,
            mask,
            rewards: rows.map((r) => rewards[r]!),
            groupIds: rows.map((r) => groupIds[r]!),
            advantages: rows.map((r) => adv[r]!),
          }).loss;
        return grad(loss)(params);
      });
      const leaves = treeLeaves(grads);
      const flat: number[] = [];
      for (const leaf of leaves) for (const x of await leaf.data()) flat.push(x);
      dispose(grads);
      acc[name].add(flat);
    }
  }

  const stats = objectives.groupStats(rewards, groupIds);
  const mixed = stats.filter((s) => s.rewardStd > 0);
  const shifts = mixed.map((s) => {
    const idx = groupIds.flatMap((gid, i) => (gid === s.groupId ? [i] : []));
    const b = objectives.rccBaseline(
      idx.map((i) => rewards[i]!),
      idx.map((i) => deltas[i]!),
    );
    return Math.abs(b - s.rewardMean);
  });
  const within = groupIds.map(
    (gid, i) => deltas[i]! - mean(groupIds.flatMap((h, j) => (h === gid ? [deltas[j]!] : []))),
  );
  const out = (name: Name): EstimatorStats => ({
    trace: acc[name].traceCovariance(),
    meanSquaredNorm: acc[name].meanSquaredNorm(),
  });
  return {
    minibatches: acc.grpo.count,
    groupsPerMinibatch: opts.groupsPerMinibatch,
    rollouts: rewards.length,
    reward: mean(rewards),
    mixedGroups: mixed.length / stats.length,
    meanAbsDelta: mean(deltas.map(Math.abs)),
    withinGroupDeltaStd: Math.sqrt(mean(within.map((x) => x * x))),
    rewardDeltaCorrelation: withinGroupCorrelation(rewards, deltas, groupIds),
    meanBaselineShift: mean(shifts),
    grpo: out('grpo'),
    rcc: out('rcc'),
    rccMean: out('rccMean'),
    weightedGrpo: out('weightedGrpo'),
    weightedRcc: out('weightedRcc'),
    weightedOptimal: out('weightedOptimal'),
  };
}
