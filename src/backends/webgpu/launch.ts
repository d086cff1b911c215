import type { KernelTensor } from '../../core/backend.js';
import { BackendError } from '../../core/errors.js';
import { checkInputs, isTensor, packUniforms, type Program, type UniformValue } from './program.js';
import type { Dispatch, GpuRuntime } from './runtime.js';
import { bufferOf } from './storage.js';

/**
 * The one way a kernel runs: `launch(rt, program, call)` (as tfjs's `runWebGPUProgram`), from the program's
 * record (program.ts) and one call's tensors, sizes and uniform values. Every kernel file calls it;
 * `GpuRuntime.dispatch` is the lower-level call underneath, which only this file and the runtime specs call.
 */
export type Workgroups = readonly [number, number, number];

export type Outputs<O extends readonly (number | GPUBuffer)[]> = { -readonly [K in keyof O]: GPUBuffer };

/** How many workgroups a launch dispatches, from the program's workgroup size. */
export type Grid =
  /** `n` invocations along x of a 1-D workgroup, split over x and y (`thread_index`) when one dimension is not enough. */
  | { readonly threads: number }
  /** Invocations per dimension: ceil(threads[d] / workgroupSize[d]) workgroups along d (no split). */
  | { readonly threads: readonly [number, number, number] }
  /** `n` workgroups (one per row, ...), split over x and y likewise (`workgroup_index`). */
  | { readonly workgroups: number }
  /** Workgroups per dimension, as given. */
  | { readonly workgroups: Workgroups };

export interface LaunchCall<O extends readonly (number | GPUBuffer)[]> {
  /** The name the dispatch is counted and reported under (default: the program's; `copy` runs as `permute`). */
  readonly kernel?: string;
  /** One of the program's entry points (default: its first). */
  readonly entryPoint?: string;
  /** One per input binding: a tensor (its dtype checked against the binding) or a launcher's own buffer. */
  readonly inputs: readonly (KernelTensor | GPUBuffer)[];
  /** One per output binding: a byte count allocates a new pooled buffer, a buffer is written. */
  readonly outputs: O;
  readonly grid: Grid;
  /** Every uniform field of the program by name, but `grid_x` (the launch fills it in). */
  readonly uniforms?: Readonly<Record<string, UniformValue>>;
}

function workgroupsOf(program: Program, g: Grid, maxPerDim: number): Workgroups {
  if ('workgroups' in g) return typeof g.workgroups === 'number' ? split(g.workgroups, maxPerDim) : g.workgroups;
  const [x, y, z] = program.workgroupSize;
  if (typeof g.threads !== 'number') {
    const [tx, ty, tz] = g.threads;
    return [Math.ceil(tx / x), Math.ceil(ty / y), Math.ceil(tz / z)];
  }
  if (y !== 1 || z !== 1)
    throw new BackendError(
      'webgpu',
      `program ${program.name}: a thread count needs a 1-D workgroup, not ${x}x${y}x${z}`,
    );
  return split(Math.ceil(g.threads / x), maxPerDim);
}

/** `count` workgroups over x, and over y too when x alone would exceed the per-dimension limit. */
function split(count: number, maxPerDim: number): Workgroups {
  if (count === 0) return [0, 0, 0];
  if (count <= maxPerDim) return [count, 1, 1];
  const y = Math.ceil(count / maxPerDim);
  return [Math.ceil(count / y), y, 1];
}

/**
 * Run a program (as tfjs's `runWebGPUProgram`): check the inputs' dtypes against the record, allocate the
 * outputs from the pool, skip the dispatch when there is no work, size the grid from the workgroup size (split
 * within the per-dimension limit), pack the uniforms by name and dispatch. Returns the output buffers.
 */
export function launch<const O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  program: Program,
  call: LaunchCall<O>,
): Outputs<O> {
  const { outputs, dispatch } = prepareLaunch(rt, program, call);
  if (dispatch) rt.dispatch(dispatch);
  return outputs;
}

/**
 * Everything `launch` does but the dispatch: the outputs (allocated) and the dispatch record, or null when
 * there is no work. The tuner times candidates from it (`GpuRuntime.timeDispatch`) with the same checks, grid
 * and uniforms as an ordinary launch.
 */
export function prepareLaunch<const O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  program: Program,
  call: LaunchCall<O>,
): { outputs: Outputs<O>; dispatch: Dispatch | null } {
  const kernel = call.kernel ?? program.name;
  if (call.inputs.length !== program.inputs.length || call.outputs.length !== program.outputs.length) {
    throw new BackendError(
      'webgpu',
      `${kernel}: ${call.inputs.length} inputs and ${call.outputs.length} outputs given, program ${program.name} ` +
        `binds ${program.inputs.length} and ${program.outputs.length}`,
    );
  }
  checkInputs(program, kernel, call.inputs);
  const entryPoint = call.entryPoint ?? program.entryPoints[0]!;
  if (!program.entryPoints.includes(entryPoint))
    throw new BackendError('webgpu', `${kernel}: program ${program.name} has no entry point ${entryPoint}`);
  const outputs = call.outputs.map((o) => (typeof o === 'number' ? rt.alloc(o) : o)) as Outputs<O>;
  const workgroups = workgroupsOf(program, call.grid, rt.maxWorkgroupsPerDim);
  if (workgroups[0] === 0 || workgroups[1] === 0 || workgroups[2] === 0) return { outputs, dispatch: null };
  const dispatch: Dispatch = {
    kernel,
    key: program.entryPoints.length > 1 ? `${program.key}:${entryPoint}` : program.key,
    bindings: program.bindings,
    source: () => program.source,
    entryPoint,
    buffers: [...call.inputs.map((t) => (isTensor(t) ? bufferOf(t.storage) : t)), ...(outputs as GPUBuffer[])],
    ...(program.fields.length > 0 ? { uniforms: packUniforms(program, call.uniforms ?? {}, workgroups[0]) } : {}),
    workgroups,
  };
  return { outputs, dispatch };
}
