/** bench:lora-real's closing table: each side's rounds, their ratios, peak RSS and the CPU backend's heap. */
import { markdownTable } from '../../src/cli/progress.js';

/** One side's run in one round, as its process printed it (bench/lora-real.ts `--ours`, bench/lora_torch.py). */
export interface SideRun {
  readonly sample_seconds: readonly number[];
  readonly update_seconds: readonly number[];
  readonly peak_rss_bytes: number;
  readonly heap_bytes?: number;
  readonly estimate_bytes?: number;
}

const GIB = 2 ** 30;
const sorted = (xs: readonly number[]): number[] => [...xs].sort((a, b) => a - b);
const median = (xs: readonly number[]): number => sorted(xs)[Math.floor(xs.length / 2)]!;
const list = (xs: readonly number[]): string => xs.map((x) => x.toFixed(1)).join(', ');

export function loraRealTable(ours: readonly SideRun[], torch: readonly SideRun[]): string {
  const rows: string[][] = [];
  const seconds = (label: string, of: (r: SideRun) => readonly number[]): void => {
    const a = ours.flatMap(of);
    const b = torch.flatMap(of);
    const ratio = b.length
      ? `${(Math.min(...a) / Math.min(...b)).toFixed(2)} / ${(median(a) / median(b)).toFixed(2)}`
      : '-';
    rows.push([label, list(a), b.length ? list(b) : 'not run', ratio]);
  };
  seconds('rollouts (s)', (r) => r.sample_seconds);
  seconds('update (s)', (r) => r.update_seconds);
  seconds('whole step (s)', (r) => r.sample_seconds.map((s, i) => s + r.update_seconds[i]!));
  const rss = (rs: readonly SideRun[]): string =>
    rs.length ? `${(Math.max(...rs.map((r) => r.peak_rss_bytes)) / GIB).toFixed(2)} GiB` : 'not run';
  rows.push(['peak RSS of the process', rss(ours), rss(torch), '']);
  const heap = Math.max(...ours.map((r) => r.heap_bytes ?? 0));
  const estimate = Math.max(...ours.map((r) => r.estimate_bytes ?? 0));
  rows.push([
    'CPU backend heap carved / memory estimate',
    `${(heap / GIB).toFixed(2)} / ${(estimate / GIB).toFixed(2)} GiB`,
    '',
    '',
  ]);
  return markdownTable(['', 'ours (each round)', 'PyTorch (each round)', 'ratio min / median'], rows);
}
