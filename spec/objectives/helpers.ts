/**
 * Test helpers for the objectives: random batches (fast-check), f64 tensors, tolerances, finite differences,
 * and plain-loop references. The references are written from the formulas (spec file, papers) over plain
 * numbers; they never call the implementation.
 */
import fc from 'fast-check';
import { tensor, type Tensor } from '../../src/index.js';
import type { RolloutBatch } from '../../src/objectives/index.js';

export interface Raw {
  readonly b: number;
  readonly t: number;
  /** Row-major [B, T]. Padding entries hold arbitrary (finite) values. */
  readonly logp: number[];
  readonly old: number[];
  readonly ref: number[];
  readonly mask: number[];
  readonly rewards: number[];
  readonly groupIds: number[];
}

export const f64 = (xs: readonly number[], shape: number[]): Tensor => tensor([...xs], shape, { dtype: 'f64' });

export function toBatch(
  raw: Raw,
  logp: Tensor = f64(raw.logp, [raw.b, raw.t]),
  extra: Partial<RolloutBatch> = {},
): RolloutBatch {
  return {
    logProbs: logp,
    oldLogProbs: f64(raw.old, [raw.b, raw.t]),
    refLogProbs: f64(raw.ref, [raw.b, raw.t]),
    mask: f64(raw.mask, [raw.b, raw.t]),
    rewards: raw.rewards,
    groupIds: raw.groupIds,
    ...extra,
  };
}

/** |a - b| <= tol * max(1, |a|, |b|): relative for large values, absolute near 0. */
export function close(a: number, b: number, tol: number): boolean {
  return Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));
}

export function expectClose(actual: number, expected: number, tol: number, what = ''): void {
  if (!close(actual, expected, tol))
    throw new Error(`${what}: ${actual} vs ${expected} (diff ${Math.abs(actual - expected)}, tol ${tol})`);
}

export function expectAllClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what = ''): void {
  if (actual.length !== expected.length) throw new Error(`${what}: length ${actual.length} vs ${expected.length}`);
  for (let i = 0; i < actual.length; i++) expectClose(actual[i]!, expected[i]!, tol, `${what}[${i}]`);
}

/** Central finite differences of f at x (all coordinates). */
export function finiteDiff(f: (x: number[]) => number, x: readonly number[], h = 1e-6): number[] {
  const g: number[] = [];
  const y = [...x];
  for (let i = 0; i < x.length; i++) {
    const xi = x[i]!;
    y[i] = xi + h;
    const up = f(y);
    y[i] = xi - h;
    const down = f(y);
    y[i] = xi;
    g.push((up - down) / (2 * h));
  }
  return g;
}

// ---------------------------------------------------------------------------------------------------------------
// Random batches.

export interface BatchShape {
  /** Group sizes (each >= 1). */
  readonly sizes: readonly number[];
  readonly t: number;
}

/** A rollout group layout: 1..maxGroups groups of minG..maxG rows, T in 1..maxT. */
export const arbShape = (
  o: { maxGroups?: number; minG?: number; maxG?: number; maxT?: number } = {},
): fc.Arbitrary<BatchShape> =>
  fc.record({
    sizes: fc.array(fc.integer({ min: o.minG ?? 2, max: o.maxG ?? 8 }), { minLength: 1, maxLength: o.maxGroups ?? 3 }),
    t: fc.integer({ min: 1, max: o.maxT ?? 6 }),
  });

const logProb = fc.double({ min: -6, max: -0.01, noNaN: true });
/** Log-ratio l - l_old: ratios from e^-2.5 to e^2.5, far outside any clip range. */
const logRatio = fc.double({ min: -2.5, max: 2.5, noNaN: true });

export interface RawOptions {
  /** 'binary': rewards in {0, 1} with 0 < N+ < G in every group; 'binary-any': any {0, 1}; 'real': uniform reals. */
  readonly rewards?: 'binary' | 'binary-any' | 'real';
  /** Probability that a mask entry is 1 (random, not only prefixes). */
  readonly density?: number;
  /** Log-ratios to stay away from (kinks of the objective), by at least `gap`. */
  readonly kinks?: readonly number[];
  /** Whether rows may have no completion token at all. Default true. */
  readonly allowEmpty?: boolean;
}

function awayFromKinks(d: number, kinks: readonly number[], gap = 1e-4): number {
  for (const k of kinks) if (Math.abs(d - k) < gap) return k + (d >= k ? gap : -gap);
  return d;
}

export function arbRaw(shape: fc.Arbitrary<BatchShape>, o: RawOptions = {}): fc.Arbitrary<Raw> {
  return shape.chain(({ sizes, t }) => {
    const b = sizes.reduce((s, g) => s + g, 0);
    const n = b * t;
    const groupIds = sizes.flatMap((g, q) => new Array<number>(g).fill(q * 7 + 3)); // non-contiguous ids
    const rewardsArb: fc.Arbitrary<number[]> =
      o.rewards === 'real'
        ? // reals on a fine grid (ties happen, denormals do not)
          fc.array(
            fc.integer({ min: -2000, max: 3000 }).map((k) => k / 1000),
            { minLength: b, maxLength: b },
          )
        : fc
            .tuple(...sizes.map((g) => fc.array(fc.constantFrom(0, 1), { minLength: g, maxLength: g })))
            .map((gs) =>
              gs.map((rs) => {
                if (o.rewards === 'binary-any') return rs;
                // force 0 < N+ < G
                const pos = rs.filter((r) => r === 1).length;
                if (pos === 0) rs[0] = 1;
                if (pos === rs.length) rs[0] = 0;
                return rs;
              }),
            )
            .map((gs) => gs.flat());
    const density = o.density ?? 0.75;
    return fc
      .record({
        logp: fc.array(logProb, { minLength: n, maxLength: n }),
        d: fc.array(logRatio, { minLength: n, maxLength: n }),
        dref: fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: n, maxLength: n }),
        maskU: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: n, maxLength: n }),
        rewards: rewardsArb,
        // rows forced non-empty unless empty rows are allowed
        firstTok: fc.array(fc.integer({ min: 0, max: t - 1 }), { minLength: b, maxLength: b }),
      })
      .map(({ logp, d, dref, maskU, rewards, firstTok }) => {
        const mask = maskU.map((u) => (u < density ? 1 : 0));
        if (o.allowEmpty === false) firstTok.forEach((k, i) => (mask[i * t + k] = 1));
        const dd = d.map((x) => awayFromKinks(x, o.kinks ?? []));
        return {
          b,
          t,
          logp,
          old: logp.map((l, i) => l - dd[i]!),
          ref: logp.map((l, i) => l + dref[i]!),
          mask,
          rewards,
          groupIds,
        };
      });
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Plain-loop references (independent statements of the formulas).

export const rows = (raw: Pick<Raw, 'b' | 't'>, xs: readonly number[]): number[][] =>
  Array.from({ length: raw.b }, (_, i) => xs.slice(i * raw.t, (i + 1) * raw.t));

/** Group members by id, in first-appearance order. */
export function groupsOf(groupIds: readonly number[]): number[][] {
  const m = new Map<number, number[]>();
  groupIds.forEach((g, i) => {
    if (!m.has(g)) m.set(g, []);
    m.get(g)!.push(i);
  });
  return [...m.values()];
}

export interface RefAdvOptions {
  scale: 'group' | 'batch' | 'none';
  std: 'population' | 'bessel';
  eps: number;
}

function std(xs: number[], mode: 'population' | 'bessel'): number {
  let mean = 0;
  for (const x of xs) mean += x;
  mean /= xs.length;
  let ss = 0;
  for (const x of xs) ss += (x - mean) * (x - mean);
  const n = mode === 'population' ? xs.length : xs.length - 1;
  return n > 0 ? Math.sqrt(ss / n) : 0;
}

/** Group-normalised advantages (Eq. 1 / TRL / Dr. GRPO); groups with equal rewards get 0. */
export function refAdvantages(rewards: readonly number[], groupIds: readonly number[], o: RefAdvOptions): number[] {
  const out = new Array<number>(rewards.length).fill(0);
  const batchStd = std([...rewards], o.std);
  for (const g of groupsOf(groupIds)) {
    const rs = g.map((i) => rewards[i]!);
    if (rs.every((r) => r === rs[0])) continue;
    let mean = 0;
    for (const r of rs) mean += r;
    mean /= rs.length;
    const denom = o.scale === 'none' ? 1 : (o.scale === 'group' ? std(rs, o.std) : batchStd) + o.eps;
    g.forEach((i) => (out[i] = (rewards[i]! - mean) / denom));
  }
  return out;
}

export const PAPER_ADV: RefAdvOptions = { scale: 'group', std: 'population', eps: 0 };

export type RefLossType = 'grpo' | 'dapo' | 'dr_grpo' | 'bnpo';

/** Aggregate per-token x under mask m (TRL / verl definitions). */
export function refAggregate(
  x: number[][],
  m: number[][],
  type: RefLossType,
  o: { rows?: number; maxLen?: number; numItems?: number } = {},
): number {
  const b = o.rows ?? x.length;
  let total = 0;
  let count = 0;
  let seqSum = 0;
  for (let i = 0; i < x.length; i++) {
    let s = 0;
    let l = 0;
    for (let t = 0; t < x[i]!.length; t++) {
      s += x[i]![t]! * m[i]![t]!;
      l += m[i]![t]!;
    }
    total += s;
    count += l;
    seqSum += s / Math.max(1, l);
  }
  switch (type) {
    case 'grpo':
      return seqSum / Math.max(1, b);
    case 'dapo':
      return total / (o.numItems ?? Math.max(1, count));
    case 'bnpo':
      return total / Math.max(1, count);
    case 'dr_grpo':
      return total / (Math.max(1, b) * (o.maxLen ?? x[0]!.length));
  }
}

export const k3Ref = (l: number, ref: number): number => Math.exp(ref - l) - (ref - l) - 1;

export interface RefGrpo {
  eps: number;
  epsHigh: number;
  beta: number;
  lossType: RefLossType;
  dualClip: number | null;
  delta: number | null;
  adv: RefAdvOptions;
  /** Rows kept (DAPO dynamic sampling); all when absent. */
  keep?: boolean[];
  rewards?: number[];
}

/** GRPO / DAPO / Dr. GRPO loss by plain loops: -min(rho A, clip(rho) A) (+ dual clip) + beta k3, aggregated. */
export function refGrpoLoss(raw: Raw, logp: readonly number[], o: RefGrpo): number {
  const a = refAdvantages(o.rewards ?? raw.rewards, raw.groupIds, o.adv);
  const x: number[][] = [];
  const m: number[][] = [];
  for (let i = 0; i < raw.b; i++) {
    const xr: number[] = [];
    const mr: number[] = [];
    for (let t = 0; t < raw.t; t++) {
      const k = i * raw.t + t;
      const on = raw.mask[k] === 1 && (o.keep ? o.keep[i]! : true);
      mr.push(on ? 1 : 0);
      if (raw.mask[k] !== 1) {
        xr.push(0);
        continue;
      }
      const rho = Math.exp(logp[k]! - raw.old[k]!);
      const clipped = Math.min(Math.max(rho, 1 - o.eps), 1 + o.epsHigh);
      const r1 = o.delta === null ? rho : Math.min(rho, o.delta);
      let f = Math.min(r1 * a[i]!, clipped * a[i]!);
      if (o.dualClip !== null && a[i]! < 0) f = Math.max(f, o.dualClip * a[i]!);
      xr.push(-f + o.beta * k3Ref(logp[k]!, raw.ref[k]!));
    }
    x.push(xr);
    m.push(mr);
  }
  const kept = o.keep ? o.keep.filter(Boolean).length : raw.b;
  return refAggregate(x, m, o.lossType, { rows: kept });
}

/** Per-row length L_i and its safe version. */
export function lengthsOf(raw: Raw): number[] {
  return rows(raw, raw.mask).map((r) => r.reduce((s, v) => s + v, 0));
}
