import type { BindingKind } from './pipelines.js';
import type { GpuRuntime } from './runtime.js';
import { grid } from './wgsl.js';

/**
 * The one way a kernel runs (as tfjs's `runWebGPUProgram`): allocate the outputs from the pool, skip the
 * dispatch when there is no work, split the work into a grid within the per-dimension limit, fill the uniforms
 * (which may depend on that grid) and dispatch. Bindings follow one order everywhere: the read-only inputs, then
 * the written outputs, then the uniform block if there is one, so the layout is derived, not spelled out.
 *
 * Every kernel file builds a `LaunchSpec` and returns what `launch` returns; `GpuRuntime.dispatch` is the
 * lower-level call underneath, which only this file and the runtime specs call.
 */
export type Workgroups = readonly [number, number, number];

export type Grid =
  /** `threads` invocations along x, `workgroupSize` per workgroup (the shader's), split over x and y if needed. */
  | { readonly threads: number; readonly workgroupSize: number }
  /** An explicit grid (a 2-D tiling, one workgroup per row, ...). */
  | { readonly workgroups: Workgroups };

export interface LaunchSpec<O extends readonly (number | GPUBuffer)[]> {
  /** The kernel's name, as errors and profiles report it. */
  readonly kernel: string;
  /** Everything the generated source depends on (dtype, rank, variant); defaults to `kernel`. */
  readonly key?: string;
  readonly source: () => string;
  readonly entryPoint?: string;
  /** Read-only storage bindings, first, in order. */
  readonly inputs: readonly GPUBuffer[];
  /** Written storage bindings after the inputs: a byte count allocates a new pooled buffer, a buffer is written. */
  readonly outputs: O;
  readonly grid: Grid;
  /** The uniform block (the last binding), or a function of the grid when the shader needs its x extent. */
  readonly uniforms?: Uint32Array | ((workgroups: Workgroups) => Uint32Array);
}

export type Outputs<O extends readonly (number | GPUBuffer)[]> = { -readonly [K in keyof O]: GPUBuffer };

const bindingCache = new Map<string, readonly BindingKind[]>();

/** The binding kinds of a layout: `reads` inputs, `writes` outputs, and a uniform block or not (cached). */
function bindingsOf(reads: number, writes: number, uniform: boolean): readonly BindingKind[] {
  const key = `${reads}/${writes}/${+uniform}`;
  let kinds = bindingCache.get(key);
  if (!kinds) {
    const list: BindingKind[] = [
      ...Array<BindingKind>(reads).fill('read'),
      ...Array<BindingKind>(writes).fill('write'),
    ];
    if (uniform) list.push('uniform');
    kinds = list;
    bindingCache.set(key, kinds);
  }
  return kinds;
}

export function launch<const O extends readonly (number | GPUBuffer)[]>(
  rt: GpuRuntime,
  spec: LaunchSpec<O>,
): Outputs<O> {
  const outputs = spec.outputs.map((o) => (typeof o === 'number' ? rt.alloc(o) : o)) as Outputs<O>;
  const workgroups: Workgroups =
    'workgroups' in spec.grid
      ? spec.grid.workgroups
      : spec.grid.threads === 0
        ? [0, 0, 0]
        : grid(Math.ceil(spec.grid.threads / spec.grid.workgroupSize), rt.maxWorkgroupsPerDim);
  if (workgroups[0] === 0 || workgroups[1] === 0 || workgroups[2] === 0) return outputs;
  const uniforms = typeof spec.uniforms === 'function' ? spec.uniforms(workgroups) : spec.uniforms;
  rt.dispatch({
    kernel: spec.kernel,
    key: spec.key ?? spec.kernel,
    bindings: bindingsOf(spec.inputs.length, outputs.length, uniforms !== undefined),
    source: spec.source,
    ...(spec.entryPoint !== undefined ? { entryPoint: spec.entryPoint } : {}),
    buffers: [...spec.inputs, ...(outputs as GPUBuffer[])],
    ...(uniforms !== undefined ? { uniforms } : {}),
    workgroups,
  });
  return outputs;
}
