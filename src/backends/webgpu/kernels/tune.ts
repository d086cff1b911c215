import { launch, prepareLaunch, type LaunchCall } from '../launch.js';
import type { Program } from '../program.js';
import type { GpuRuntime } from '../runtime.js';
import type { TuneTrial } from '../tuner.js';

/** One candidate's launch on a trial's scratch inputs: the same record and call an ordinary launch would make. */
export type CandidateLaunch = (
  candidate: string,
  inputs: readonly GPUBuffer[],
) => { readonly program: Program; readonly call: LaunchCall<readonly [number]> };

/**
 * The tuning trial (tuner.ts) of a kernel launched through `launch` with one output: the scratch inputs are
 * uploaded once (deterministic values the kernel family makes), each candidate's launch comes from `launchOf`,
 * its result is read back to be compared with the default's, and its time is taken by `GpuRuntime.timeDispatch`.
 */
export function launchTrial(
  rt: GpuRuntime,
  inputs: readonly ArrayBufferView[],
  outputBytes: number,
  launchOf: CandidateLaunch,
  agree: TuneTrial['agree'],
): TuneTrial {
  const buffers = inputs.map((d) => rt.upload(d));
  return {
    result: async (candidate) => {
      const { program, call } = launchOf(candidate, buffers);
      const [out] = launch(rt, program, call);
      try {
        return new Float32Array(await rt.read(out, outputBytes));
      } finally {
        rt.release(out);
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
