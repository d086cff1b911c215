/**
 * What a task of `npm run bench:gpu` is (bench/gpu.bench.ts runs them in interleaved rounds; bench/lib/lora-gpu.ts
 * makes the LoRA ones) and how a timed result is checked against a host backend before its time counts.
 */
import type { WebGpuBackend } from '../../src/index.js';

export interface Task {
  readonly name: string;
  readonly unit: string;
  /** The figure from milliseconds per unit of work (GFLOP/s, ms/step, tokens/s). */
  readonly figure: (ms: number) => number;
  readonly checked: string;
  /** One timed unit of work, checked; its milliseconds. */
  readonly run: (round: number) => Promise<number>;
  /** The peer's task, or null where another task (the same step under another configuration) asks it. */
  readonly peer: Record<string, unknown> | null;
  /** Tasks of one group (a step size under several configurations) share the peer's times. */
  readonly group?: string;
  /** After the rounds: lines on where one more (untimed) unit's time goes. */
  readonly inspect?: () => Promise<string[]>;
  counters: string;
  readonly dispose: () => void;
}

/** A timed result that disagrees with the CPU backend: that task's times never count, the others go on. */
export class CheckError extends Error {}

/**
 * The host backend's result a task is checked against (the CPU backend's, or the reference backend's for the
 * wide-vocabulary steps). If it cannot be computed (out of the CPU backend's 4 GiB WebAssembly memory, say), the
 * task cannot be checked, so its times cannot count: a CheckError, not a crash.
 */
export async function hostReference<R>(task: string, f: () => Promise<R>): Promise<R> {
  try {
    return await f();
  } catch (e) {
    throw new CheckError(`${task}: the host reference failed: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** |got - want| <= atol + rtol |want| everywhere, else a CheckError naming the task: its time never counts. */
export function check(
  task: string,
  what: string,
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  atol: number,
  rtol: number,
) {
  if (got.length !== want.length) throw new CheckError(`${task}: ${what}: ${got.length} values, want ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const [g, w] = [got[i]!, want[i]!];
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w)))
      throw new CheckError(`${what}[${i}] = ${g}, the CPU backend's ${w}: a wrong kernel or a dropped dispatch`);
  }
}

/** Timed steps a round, back to back as a training loop runs them (one step a round moved by a quarter between
 * rounds on an H200). */
export const STEPS_A_ROUND = 3;

type Stats = ReturnType<WebGpuBackend['stats']>;

/** A step's loss and gradient norm as read back, and the counters when its work was all encoded. */
export interface StepResult {
  readonly loss: number;
  readonly norm: number;
  readonly encoded: Stats;
}

/**
 * One untimed step (the tasks before this one on the device, another size or configuration, left the buffer pool
 * shaped for their work, which a loop repeating one step never sees: on an H100 the first configuration of each
 * size created 600 to 1,500 buffers a step), then STEPS_A_ROUND timed ones: the mean milliseconds, every step's
 * result (for the caller to check, after the clock), and the last step's counters.
 */
export async function timedSteps(
  gpu: WebGpuBackend,
  step: () => Promise<StepResult>,
): Promise<{ ms: number; results: StepResult[]; counters: string }> {
  await step();
  await gpu.sync();
  const results: StepResult[] = [];
  const each: number[] = [];
  const first = gpu.stats();
  let before = first;
  for (let i = 0; i < STEPS_A_ROUND; i++) {
    before = gpu.stats();
    const t0 = performance.now();
    results.push(await step());
    each.push(performance.now() - t0);
  }
  const ms = each.reduce((a, b) => a + b, 0) / STEPS_A_ROUND;
  const after = gpu.stats();
  const { encoded } = results[results.length - 1]!;
  // The pool's churn over all of them: a buffer it destroys is freed by Dawn inside a later submit.
  const counters =
    `${encoded.dispatches - before.dispatches} dispatches, ${after.submits - before.submits} submits, ` +
    `${after.readBacks - before.readBacks} read-back (${encoded.readBacks - before.readBacks} inside) a step; ` +
    `steps ${each.map((x) => x.toFixed(1)).join(', ')} ms; ${after.buffersCreated - first.buffersCreated} buffers ` +
    `created, ${after.destroyed - first.destroyed} destroyed in them`;
  return { ms, results, counters };
}
