import { appendFileSync, dirname, makeDirectoriesSync } from '../platform/files.js';
import type { Tensor } from '../core/tensor.js';

/** One line of metrics.jsonl: the phase, the step and named numbers. */
export type MetricRecord = { readonly phase: 'warmstart' | 'rl' | 'eval'; readonly step: number } & Readonly<
  Record<string, number | string>
>;

/**
 * Read scalar metric tensors (they are detached) and dispose them. Every read is asked for in one turn, so an
 * asynchronous device answers them with one read-back (one wait for the host) rather than one each.
 */
export async function readMetrics(metrics: Readonly<Record<string, Tensor>>): Promise<Record<string, number>> {
  const entries = Object.entries(metrics);
  const values = await Promise.all(entries.map(([, t]) => t.data()));
  const out: Record<string, number> = {};
  entries.forEach(([name, t], i) => {
    out[name] = values[i]![0]!;
    t.dispose();
  });
  return out;
}

/** Appends records as JSON lines; created on first write. */
export class MetricsWriter {
  private created = false;
  constructor(readonly path: string | null) {}
  write(record: MetricRecord): void {
    if (!this.path) return;
    if (!this.created) {
      makeDirectoriesSync(dirname(this.path));
      this.created = true;
    }
    appendFileSync(this.path, `${JSON.stringify(record)}\n`);
  }
}
