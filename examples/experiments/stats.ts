/**
 * The statistics the report uses, kept small and tested: mean and sample standard deviation over seeds, the
 * binomial standard error of a pass rate, a paired t-test across seeds, and the verdict rule applied to every
 * claim (fixed before the results were seen; see RESULTS.md, "How claims are judged").
 */

export const mean = (xs: readonly number[]): number => (xs.length === 0 ? NaN : xs.reduce((s, x) => s + x, 0) / xs.length);

/** Sample standard deviation (n - 1); 0 for a single value, NaN for none. */
export function std(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  if (xs.length === 1) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1));
}

/** Standard error of a proportion p measured on n independent items: sqrt(p (1 - p) / n). */
export const binomialSe = (p: number, n: number): number => Math.sqrt((p * (1 - p)) / n);

/** One-sided 95% critical values of Student's t by degrees of freedom (1..30; beyond: the normal's 1.645). */
const T95 = [6.314, 2.92, 2.353, 2.132, 2.015, 1.943, 1.895, 1.86, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.74, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697];
export const tCritical95 = (df: number): number => (df < 1 ? Infinity : (T95[df - 1] ?? 1.645));

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
  return { diffs, meanDiff: m, stdDiff: s, t, wins: diffs.filter((d) => d > 0).length, losses: diffs.filter((d) => d < 0).length };
}

export type Verdict = 'holds' | 'contradicted' | 'inconclusive';

/**
 * The rule for "a is better than b": holds when the mean paired difference is positive and significant (one-sided
 * paired t-test at 5%, df = seeds - 1) and larger than `minEffect`; contradicted when it is negative and
 * significant by the same test; inconclusive otherwise. `minEffect` (default: the binomial standard error of one
 * evaluation) keeps a difference smaller than the evaluation noise from counting, however consistent.
 */
export function verdict(c: PairedComparison, minEffect = 0): Verdict {
  const n = c.diffs.length;
  if (n < 2) return 'inconclusive';
  const crit = tCritical95(n - 1);
  if (c.meanDiff > minEffect && c.t > crit) return 'holds';
  if (c.meanDiff < -minEffect && c.t < -crit) return 'contradicted';
  return 'inconclusive';
}

/** "mean ± std" in percent with one decimal, e.g. 63.5 ± 2.1; "–" when there are no values. */
export function pct(xs: readonly number[], digits = 1): string {
  if (xs.length === 0) return '–';
  return `${(100 * mean(xs)).toFixed(digits)} ± ${(100 * std(xs)).toFixed(digits)}`;
}

/** A signed percentage-point difference, e.g. +1.5 or -0.3. */
export const signedPts = (x: number, digits = 1): string => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(digits)}`;

/** A Markdown table from a header and rows (cells are escaped for '|'). */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[], align: readonly ('l' | 'r')[] = []): string {
  const esc = (s: string): string => s.replace(/\|/g, '\\|');
  const sep = header.map((_, i) => ((align[i] ?? (i === 0 ? 'l' : 'r')) === 'r' ? '---:' : ':---'));
  return [header, sep, ...rows].map((r, k) => `| ${(k === 1 ? r : r.map(esc)).join(' | ')} |`).join('\n');
}
