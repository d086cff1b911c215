import type { KernelTensor } from '../../core/backend.js';
import type { DType } from '../../core/dtype.js';
import { BackendError, DTypeError } from '../../core/errors.js';
import type { BindingKind } from './pipelines.js';

/**
 * A WebGPU kernel's contract, written once (as tfjs-backend-webgpu's `WebGPUProgram`): its name, its storage
 * bindings in binding order (the read-only inputs, then the written outputs) with their element types, its
 * uniform fields, its workgroup size and its WGSL body. Everything else is derived from the record:
 * - the WGSL header (`source`): the workgroup-size constants `WG_X`, `WG_Y`, `WG_Z` and `WG` (their product),
 *   the `Params` struct, one declaration per binding, and, when the record has the `grid_x` field, the index
 *   helpers of a grid split over x and y (`thread_index(gid)`, `workgroup_index(wg)`);
 * - the launch (`launch.ts`): the bind-group layout, the dispatch size from the workgroup size, the uniform block
 *   packed by field name (`grid_x`, the dispatch's workgroups along x, filled in by the launch);
 * - the dtype rule: a tensor bound to an `f32` or `vec4<f32>` binding must be f32, to an `i32` binding i32; a
 *   `u32` binding moves 32-bit words, of either; a `bf16x2` (`f16x2`) binding, declared `array<u32>`, holds a bf16
 *   (f16) tensor two elements per word, which the body unpacks (`kernels/half.ts`).
 * A body declares no binding, no `Params` and no numeric workgroup size (`defineProgram` refuses one that does):
 * its entry points say `@compute @workgroup_size(WG_X, WG_Y, WG_Z)`.
 */
export type ElementType = 'f32' | 'i32' | 'u32' | 'vec4<f32>' | 'bf16x2' | 'f16x2';

/** The WGSL element type a binding is declared with: packed halves are u32 words. */
const declared = (t: ElementType): string => (t === 'bf16x2' || t === 'f16x2' ? 'u32' : t);

/** A uniform field: a 32-bit scalar, a vec4 of u32, or an array of them (u32 words, 16-byte aligned). */
export type UniformType = 'u32' | 'i32' | 'f32' | 'vec4<u32>' | `array<vec4<u32>, ${number}>`;

/** The value of a uniform field: a number for a scalar, the u32 words of a vector or an array (zero-padded). */
export type UniformValue = number | readonly number[];

/** The uniform field a launch fills in: the dispatch's workgroups along x. */
export const GRID_X = 'grid_x';

export interface ProgramRecord {
  /** The kernel's name, as errors, profiles and dispatch counts report it (a launch may run it under another). */
  readonly name: string;
  /** What the generated source depends on beyond the name (dtype, rank, variant): the pipeline-cache key. */
  readonly key?: string;
  /** Read-only storage bindings, in binding order: name -> element type. */
  readonly inputs: Readonly<Record<string, ElementType>>;
  /** Written storage bindings after the inputs. */
  readonly outputs: Readonly<Record<string, ElementType>>;
  /** The `Params` fields, in order (the uniform block is the last binding, `params`). */
  readonly uniforms?: Readonly<Record<string, UniformType>>;
  /** Invocations per workgroup: x, or [x, y, z]. */
  readonly workgroupSize: number | readonly [number, number, number];
  /** The WGSL after the header: helpers, then the entry points. */
  readonly body: string;
  /** Its entry points (default `main`). */
  readonly entryPoints?: readonly string[];
}

interface Field {
  readonly name: string;
  readonly type: UniformType;
  /** Offset in 32-bit words. */
  readonly word: number;
  /** Size in 32-bit words. */
  readonly words: number;
}

export interface Program {
  readonly name: string;
  readonly key: string;
  readonly inputs: readonly (readonly [string, ElementType])[];
  readonly outputs: readonly (readonly [string, ElementType])[];
  readonly workgroupSize: readonly [number, number, number];
  /** Invocations per workgroup (the product of `workgroupSize`). */
  readonly invocations: number;
  readonly entryPoints: readonly string[];
  /** Storage and uniform bindings in binding order, for the pipeline layout. */
  readonly bindings: readonly BindingKind[];
  readonly fields: readonly Field[];
  /** Words of the uniform block (whole vec4s), 0 without one. */
  readonly uniformWords: number;
  /** Header and body. */
  readonly source: string;
}

const DECLARED_IN_HEADER = [
  { pattern: /@binding\s*\(/, what: 'a binding' },
  { pattern: /\bstruct\s+Params\b/, what: 'the Params struct' },
  { pattern: /@workgroup_size\s*\((?!WG_X, WG_Y, WG_Z\))/, what: 'a workgroup size other than (WG_X, WG_Y, WG_Z)' },
];

function fieldWords(type: UniformType): { words: number; align: number } {
  if (type === 'u32' || type === 'i32' || type === 'f32') return { words: 1, align: 1 };
  if (type === 'vec4<u32>') return { words: 4, align: 4 };
  return { words: 4 * Number(/, (\d+)>$/.exec(type)![1]), align: 4 };
}

/** Check a record and derive its header, layout and bindings. */
export function defineProgram(record: ProgramRecord): Program {
  const { name } = record;
  for (const { pattern, what } of DECLARED_IN_HEADER)
    if (pattern.test(record.body))
      throw new BackendError('webgpu', `program ${name}: its body declares ${what}; the record generates it`);
  const entryPoints = record.entryPoints ?? ['main'];
  const size = typeof record.workgroupSize === 'number' ? [record.workgroupSize, 1, 1] : record.workgroupSize;
  const workgroupSize = [size[0]!, size[1] ?? 1, size[2] ?? 1] as const;
  let word = 0;
  const fields = Object.entries(record.uniforms ?? {}).map(([field, type]) => {
    const { words, align } = fieldWords(type);
    word = Math.ceil(word / align) * align;
    const f = { name: field, type, word, words };
    word += words;
    return f;
  });
  const inputs = Object.entries(record.inputs);
  const outputs = Object.entries(record.outputs);
  const bindings: BindingKind[] = [...inputs.map(() => 'read' as const), ...outputs.map(() => 'write' as const)];
  if (fields.length > 0) bindings.push('uniform');
  return {
    name,
    key: record.key ?? name,
    inputs,
    outputs,
    workgroupSize,
    invocations: workgroupSize[0] * workgroupSize[1] * workgroupSize[2],
    entryPoints,
    bindings,
    fields,
    uniformWords: Math.ceil(word / 4) * 4,
    source: `${header(name, workgroupSize, inputs, outputs, fields)}\n${record.body}`,
  };
}

function header(
  name: string,
  [x, y, z]: readonly [number, number, number],
  inputs: readonly (readonly [string, ElementType])[],
  outputs: readonly (readonly [string, ElementType])[],
  fields: readonly Field[],
): string {
  const lines = [
    `// ${name}: header generated from its program record (src/backends/webgpu/program.ts).`,
    `const WG_X: u32 = ${x}u;`,
    `const WG_Y: u32 = ${y}u;`,
    `const WG_Z: u32 = ${z}u;`,
    `const WG: u32 = ${x * y * z}u;`,
  ];
  if (fields.length > 0) lines.push(`struct Params {\n${fields.map((f) => `  ${f.name}: ${f.type},`).join('\n')}\n};`);
  let binding = 0;
  for (const [n, t] of inputs)
    lines.push(`@group(0) @binding(${binding++}) var<storage, read> ${n}: array<${declared(t)}>;`);
  for (const [n, t] of outputs)
    lines.push(`@group(0) @binding(${binding++}) var<storage, read_write> ${n}: array<${declared(t)}>;`);
  if (fields.length > 0) lines.push(`@group(0) @binding(${binding}) var<uniform> params: Params;`);
  if (fields.some((f) => f.name === GRID_X)) {
    lines.push(
      '// The grid may be split over x and y (params.grid_x workgroups along x): the linear thread and workgroup.',
      'fn thread_index(gid: vec3<u32>) -> u32 {\n  return gid.x + gid.y * params.grid_x * WG_X;\n}',
      'fn workgroup_index(wg: vec3<u32>) -> u32 {\n  return wg.x + wg.y * params.grid_x;\n}',
    );
  }
  return lines.join('\n');
}

const ACCEPTS: Readonly<Record<ElementType, readonly DType[]>> = {
  f32: ['f32'],
  'vec4<f32>': ['f32'],
  i32: ['i32'],
  u32: ['f32', 'i32'],
  bf16x2: ['bf16'],
  f16x2: ['f16'],
};

/** A tensor, as opposed to a launcher's own buffer (a temporary, the statistics between two dispatches). */
export const isTensor = (t: KernelTensor | GPUBuffer): t is KernelTensor => 'storage' in t;

/**
 * The dtype rule of the record: each tensor bound to an input must have its binding's element type. Buffers
 * (a launcher's own temporaries) carry no dtype and are not checked. `launch` applies it; a launcher that may
 * return early without launching (an empty output) applies it first.
 */
export function checkInputs(program: Program, kernel: string, inputs: readonly (KernelTensor | GPUBuffer)[]): void {
  inputs.forEach((t, i) => {
    if (!isTensor(t)) return;
    const [binding, type] = program.inputs[i]!;
    if (!ACCEPTS[type].includes(t.dtype)) {
      const want =
        type === 'u32'
          ? '32-bit values (f32 or i32)'
          : type === 'vec4<f32>'
            ? 'f32'
            : type === 'bf16x2' || type === 'f16x2'
              ? type.slice(0, -2)
              : type;
      throw new DTypeError(kernel, `the WebGPU kernel needs ${want} for ${binding}, got ${t.dtype}`);
    }
  });
}

/** The uniform block of one launch: every field but `grid_x` from `values`, `grid_x` from the dispatch. */
export function packUniforms(
  program: Program,
  values: Readonly<Record<string, UniformValue>>,
  gridX: number,
): Uint32Array {
  const u32 = new Uint32Array(program.uniformWords);
  for (const f of program.fields) {
    const v = f.name === GRID_X ? gridX : values[f.name];
    if (v === undefined) throw new BackendError('webgpu', `program ${program.name}: no value for uniform ${f.name}`);
    if (typeof v !== 'number') {
      if (v.length > f.words)
        throw new BackendError('webgpu', `program ${program.name}: ${v.length} words for ${f.name} (${f.type})`);
      u32.set(v, f.word);
    } else if (f.type === 'f32' || f.type === 'i32') u32[f.word] = bitsOf(f.type, v);
    else u32[f.word] = v;
  }
  return u32;
}

/** The bits of a number as a 32-bit value of `dtype` (a fill pattern, an f32 inside a u32 array field). */
export function bitsOf(dtype: 'f32' | 'i32', value: number): number {
  if (dtype === 'i32') BITS_I32[0] = value;
  else BITS_F32[0] = value;
  return BITS_U32[0]!;
}
// One word seen three ways, made once: a typed array's `.buffer` made per launch cost more than the packing
// (an on-heap array moves off the heap when its buffer is asked for; about 0.35 us a call in Node 26).
const BITS_U32 = new Uint32Array(1);
const BITS_F32 = new Float32Array(BITS_U32.buffer);
const BITS_I32 = new Int32Array(BITS_U32.buffer);

/** Programs whose record depends on a launch (dtype, rank, a generated expression), made once per key. */
export function cachedProgram(key: string, make: () => ProgramRecord): Program {
  let p = programs.get(key);
  if (!p) {
    p = defineProgram({ ...make(), key });
    programs.set(key, p);
  }
  return p;
}

const programs = new Map<string, Program>();
