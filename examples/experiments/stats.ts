/**
 * The statistics the report uses, kept small and tested: mean and sample standard deviation over seeds, the
 * binomial standard error of a pass rate, a paired t-test across seeds, and the verdict rule applied to every
 * claim (fixed before the results were seen; see RESULTS.md, "How claims are judged").
 */

export const mean = (xs: readonly number[]): number =>
  xs.length === 0 ? NaN : xs.reduce((s, x) => s + x, 0) / xs.length;

/** Sample standard deviation (n - 1); 0 for a single value, NaN for none. */
export function std(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  if (xs.length === 1) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
}

/** Standard error of a proportion p measured on n independent items: sqrt(p (1 - p) / n). */
export const binomialSe = (p: number, n: number): number => Math.sqrt((p * (1 - p)) / n);

/** log Gamma (Lanczos, g = 7), accurate to ~1e-13 for x > 0. */
function logGamma(x: number): number {
  const c = [
    0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
    12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
  ];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  const z = x - 1;
  let a = c[0]!;
  const t = z + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

/** The continued fraction of the regularised incomplete beta function (modified Lentz). */
function betaContinuedFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  d = 1 / (Math.abs(d) < tiny ? tiny : d);
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    d = 1 / (Math.abs(d) < tiny ? tiny : d);
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    d = 1 / (Math.abs(d) < tiny ? tiny : d);
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    const del = d * c;
    h *= del;
    if (Math.abs(del - 1) < 1e-15) break;
  }
  return h;
}

/** I_x(a, b), the regularised incomplete beta function. */
export function incompleteBeta(a: number, b: number, x: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2)
    ? (front * betaContinuedFraction(a, b, x)) / a
    : 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** P(T > t) for Student's t with `df` degrees of freedom. */
export function tUpperTail(t: number, df: number): number {
  if (t === Infinity) return 0;
  if (t === -Infinity) return 1;
  const tail = 0.5 * incompleteBeta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? tail : 1 - tail;
}

/** The one-sided critical value t with P(T > t) = alpha (bisection on the tail). */
export function tCritical(df: number, alpha: number): number {
  if (df < 1) return Infinity;
  let lo = 0;
  let hi = 1e4;
  for (let i = 0; i < 200; i++) {
    const mid = (lo + hi) / 2;
    if (tUpperTail(mid, df) > alpha) lo = mid;
    else hi = mid;
  }
  return (lo + hi) / 2;
}

/** One-sided 95% critical value of Student's t. */
export const tCritical95 = (df: number): number => tCritical(df, 0.05);

export interface PairedComparison {
  /** Per-seed differences a_s - b_s. */
  readonly diffs: readonly number[];
  readonly meanDiff: number;
  readonly stdDiff: number;
  /** t = mean / (std / sqrt(n)); +-Infinity when every difference is the same nonzero number, 0 when all are 0. */
  readonly t: number;
  /** Seeds where a > b, and where a < b. */
  readonly wins: number;
  readonly losses: number;
}

/** Compare a with b seed by seed (the runs are paired: same warm-start, same RL seed). */
export function paired(a: readonly number[], b: readonly number[]): PairedComparison {
  if (a.length !== b.length) throw new Error(`paired: ${a.length} vs ${b.length} values`);
  const diffs = a.map((x, i) => x - b[i]!);
  const m = mean(diffs);
  // Differences equal up to rounding (e.g. 0.015 from different pairs of rates) have a zero spread, not 1e-17.
  const sd = std(diffs);
  const s = sd <= 1e-12 * Math.max(1, Math.abs(m)) ? 0 : sd;
  const n = diffs.length;
  const t = s > 0 ? m / (s / Math.sqrt(n)) : m === 0 ? 0 : m > 0 ? Infinity : -Infinity;
  return {
    diffs,
    meanDiff: m,
    stdDiff: s,
    t,
    wins: diffs.filter((d) => d > 0).length,
    losses: diffs.filter((d) => d < 0).length,
  };
}

export type Verdict = 'holds' | 'contradicted' | 'inconclusive';

/**
 * The rule for "a is better than b": holds when the mean paired difference is positive and significant (one-sided
 * paired t-test at level `alpha`, 5% by default, df = seeds - 1) and larger than `minEffect`; contradicted when it
 * is negative and significant by the same test; inconclusive otherwise. `minEffect` (the report passes the
 * binomial standard error of one evaluation) keeps a difference smaller than the evaluation noise from counting,
 * however consistent. A comparison picked after looking at the data (against the strongest of k baselines)
 * passes alpha / k (Bonferroni).
 */
export function verdict(c: PairedComparison, minEffect = 0, alpha = 0.05): Verdict {
  const n = c.diffs.length;
  if (n < 2) return 'inconclusive';
  const crit = tCritical(n - 1, alpha);
  if (c.meanDiff > minEffect && c.t > crit) return 'holds';
  if (c.meanDiff < -minEffect && c.t < -crit) return 'contradicted';
  return 'inconclusive';
}

/** The standard normal CDF (Abramowitz and Stegun 7.1.26 for erf: absolute error below 1.5e-7). */
export function normalCdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  const erf = 1 - poly * Math.exp(-x * x);
  return z >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
}

export interface PowerQuestion {
  /** The true mean paired difference to detect (> 0). */
  readonly effect: number;
  /** The spread (sample std) of one paired difference, from a pilot. */
  readonly sd: number;
  /** The verdict's minimum effect: the mean difference must also exceed this. */
  readonly minEffect: number;
  /** One-sided level of the test. */
  readonly alpha: number;
}

/**
 * The chance that `verdict` says "holds" with n paired seeds when the true mean difference is `effect`: the mean of
 * n differences, normal with std sd / sqrt(n), must exceed both the minimum effect and the t-test's cutoff
 * t(n - 1, alpha) sd / sqrt(n) (the sample std taken at its expected value: the usual normal approximation, which
 * gives G*Power's 8 seeds for an effect of one std at 5% and 80%).
 */
export function verdictPower(q: PowerQuestion, n: number): number {
  if (n < 2) return 0;
  const se = q.sd / Math.sqrt(n);
  const cutoff = Math.max(q.minEffect, tCritical(n - 1, q.alpha) * se);
  return se === 0 ? (q.effect > cutoff ? 1 : 0) : normalCdf((q.effect - cutoff) / se);
}

/** The fewest seeds (2..max) whose verdict power reaches `power`, or null: none does (an effect at or below the minimum effect never does). */
export function seedsForPower(q: PowerQuestion, power = 0.8, max = 1000): number | null {
  if (q.effect <= q.minEffect) return null;
  for (let n = 2; n <= max; n++) if (verdictPower(q, n) >= power) return n;
  return null;
}

/** "mean ± std" in percent with one decimal, e.g. 63.5 ± 2.1; "–" when there are no values. */
export function pct(xs: readonly number[], digits = 1): string {
  if (xs.length === 0) return '–';
  return `${(100 * mean(xs)).toFixed(digits)} ± ${(100 * std(xs)).toFixed(digits)}`;
}

/** A signed percentage-point difference, e.g. +1.5 or -0.3. */
export const signedPts = (x: number, digits = 1): string => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(digits)}`;

/** A Markdown table from a header and rows (cells are escaped for '|'). */
export function markdownTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
  align: readonly ('l' | 'r')[] = [],
): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  const sep = header.map((_, i) => ((align[i] ?? (i === 0 ? 'l' : 'r')) === 'r' ? '---:' : ':---'));
  return [header, sep, ...rows].map((r, k) => `| ${(k === 1 ? r : r.map(esc)).join(' | ')} |`).join('\n');
}
