import { launch, prepareLaunch, type LaunchCall } from '../launch.js';
import { sizeOf } from '../../../core/shape.js';
import { isTensor, type Program } from '../program.js';
import type { GpuRuntime } from '../runtime.js';
import type { TuneTrial } from '../tuner.js';

/** One candidate's launch on a trial's scratch inputs: the same record and call an ordinary launch would make. */
export type CandidateLaunch = (
  candidate: string,
  inputs: readonly GPUBuffer[],
) => { readonly program: Program; readonly call: LaunchCall<readonly number[]> };

/**
 * The tuning trial (tuner.ts) of a kernel launched through `launch`: the scratch inputs are uploaded once
 * (deterministic values the kernel family makes), each candidate's launch comes from `launchOf`, its outputs are
 * read back (in one turn: one read-back) to be compared with the default's, and its time is taken by
 * `GpuRuntime.timeDispatch`. `compared`: the outputs the launch writes (default all; a pass that leaves one
 * to a later pass must not be judged by a buffer it never wrote).
 */
export function launchTrial(
  rt: GpuRuntime,
  inputs: readonly ArrayBufferView[],
  launchOf: CandidateLaunch,
  agree: TuneTrial['agree'],
  compared?: readonly number[],
): TuneTrial {
  const buffers = inputs.map((d) => rt.upload(d));
  return {
    result: async (candidate) => {
      const { program, call } = launchOf(candidate, buffers);
      const outs = launch(rt, program, call);
      try {
        const which = compared ?? outs.map((_, i) => i);
        const parts = await Promise.all(which.map((i) => rt.read(outs[i]!, call.outputs[i]!)));
        const all = new Float32Array(parts.reduce((n, p) => n + p.byteLength / 4, 0));
        let at = 0;
        for (const p of parts) {
          all.set(new Float32Array(p), at);
          at += p.byteLength / 4;
        }
        return all;
      } finally {
        for (const o of outs) rt.release(o);
      }
    },
    time: async (candidate, reps) => {
      const { program, call } = launchOf(candidate, buffers);
      const { outputs, dispatch } = prepareLaunch(rt, program, call);
      try {
        return dispatch ? await rt.timeDispatch(dispatch, reps) : 0;
      } finally {
        for (const o of outputs) rt.release(o);
      }
    },
    agree,
    dispose: () => {
      for (const b of buffers) rt.release(b);
    },
  };
}

/** Deterministic values in [-0.5, 0.5) (a linear congruential sequence): scratch inputs every run repeats. */
export function scratchValues(n: number, seed: number): Float32Array {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    a[i] = s / 2 ** 32 - 0.5;
  }
  return a;
}

/** Whether every element agrees within atol + rtol |want| (a NaN never does). */
export const agreeWithin =
  (atol: number, rtol: number): TuneTrial['agree'] =>
  (want, got) => {
    if (want.length !== got.length) return false;
    for (let i = 0; i < want.length; i++) {
      if (!(Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!))) return false;
    }
    return true;
  };

/** What `pickLaunch` tunes: one launch whose record (and grid) varies with a named candidate. */
export interface LaunchChoice<O extends readonly (number | GPUBuffer)[]> {
  /** Candidates to choose from, the default first (the caller drops those past the device's limits). */
  readonly candidates: readonly string[];
  /** A candidate's program and call (the call's inputs and outputs as the ordinary launch's). */
  readonly launchOf: (candidate: string) => { readonly program: Program; readonly call: LaunchCall<O> };
  /** The class the choice holds for (the kernel's name is the program's). */
  readonly shapeClass: string;
  /** The outputs the launch writes (default all), compared between candidates. */
  readonly written?: readonly number[];
  /** Tolerance between candidates (default: exact, for kernels whose arithmetic per thread does not depend on it). */
  readonly agree?: TuneTrial['agree'];
  /** Scratch values of f32 input i where the default's (in [-0.5, 0.5)) would not do (a positive sum). */
  readonly scratch?: (input: number, n: number) => Float32Array | null;
}

/**
 * The tuner's pick among a launch's candidates: compared and timed on scratch inputs of the call's sizes (f32
 * inputs deterministic values, i32 inputs zeros, a valid index everywhere; in-place outputs fresh buffers of
 * their size).
 */
export function pickLaunch<O extends readonly (number | GPUBuffer)[]>(rt: GpuRuntime, c: LaunchChoice<O>): string {
  const fallback = c.candidates[0]!;
  if (!rt.tuner.enabled || c.candidates.length < 2) return fallback;
  const base = c.launchOf(fallback);
  return rt.tuner.pick({
    kernel: base.program.name,
    shapeClass: c.shapeClass,
    candidates: c.candidates,
    trial: () =>
      launchTrial(
        rt,
        base.call.inputs.map((t, i) =>
          !isTensor(t)
            ? scratchValues(t.size / 4, i + 1)
            : t.dtype === 'i32'
              ? new Int32Array(sizeOf(t.shape))
              : (c.scratch?.(i, sizeOf(t.shape)) ?? scratchValues(sizeOf(t.shape), i + 1)),
        ),
        (candidate, inputs) => {
          const { program, call } = c.launchOf(candidate);
          return {
            program,
            call: { ...call, inputs, outputs: call.outputs.map((o) => (typeof o === 'number' ? o : o.size)) },
          };
        },
        c.agree ?? agreeWithin(0, 0),
        c.written,
      ),
  });
}

/** What `pickWorkgroup` tunes: one launch whose record varies only in its workgroup size. */
export interface WorkgroupChoice<O extends readonly (number | GPUBuffer)[]>
  extends Omit<LaunchChoice<O>, 'candidates' | 'launchOf'> {
  /** Sizes to choose from, the default first (those past the device's limits are dropped). */
  readonly sizes: readonly number[];
  readonly programOf: (wg: number) => Program;
  readonly call: LaunchCall<O>;
}

/** `pickLaunch` over workgroup sizes within the device's limits. */
export function pickWorkgroup<O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  c: WorkgroupChoice<O>,
): number {
  const limits = rt.device.limits;
  const sizes = c.sizes.filter(
    (wg) => wg <= limits.maxComputeInvocationsPerWorkgroup && wg <= limits.maxComputeWorkgroupSizeX,
  );
  const { sizes: _, programOf, call, ...rest } = c;
  if (sizes.length < 2) return c.sizes[0]!;
  return Number(
    pickLaunch(rt, {
      ...rest,
      candidates: sizes.map(String),
      launchOf: (wg) => ({ program: programOf(Number(wg)), call }),
    }),
  );
}
