import type { KernelTensor } from '../../../core/backend.js';
import { registerKernels, type BinaryOp, type UnaryOp } from '../../../core/kernels.js';
import { isHalf, type DType } from '../../../core/dtype.js';
import { DTypeError } from '../../../core/errors.js';
import { broadcastStrides, sizeOf, type Shape } from '../../../core/shape.js';
import { BINARY_KERNELS, UNARY_KERNELS } from '../../../core/elementwise-kernels.js';
import prelude from '../../../../shaders/prelude.wgsl';
import template from '../../../../shaders/elementwise.wgsl';
import { launch } from '../launch.js';
import { cachedProgram } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillTemplate, wgslType } from '../wgsl.js';
import { checkRank, collapse, isContiguous } from './layout.js';
import { widenHalf } from './half.js';

/**
 * Launcher of the generic elementwise kernel (shaders/elementwise.wgsl), for a WGSL expression over named inputs
 * with NumPy broadcasting. unary, binary, where and cast are all instances. f32 expressions come from
 * `elementwise-kernels.ts`; i32 has its own table here (integer semantics of the reference kernels, which compute in
 * doubles and store into an Int32Array), and an op without an i32 form throws a DTypeError naming it.
 */
export interface EwInput {
  readonly name: string;
  readonly x: KernelTensor;
}

const I32_UNARY: Partial<Record<UnaryOp, string>> = {
  neg: '-x',
  abs: 'abs(x)',
  square: 'x * x',
  sign: 'sign(x)',
  relu: 'max(x, 0)',
  step: 'select(0, 1, x > 0)',
};

const I32_BINARY: Partial<Record<BinaryOp, string>> = {
  add: 'a + b',
  sub: 'a - b',
  mul: 'a * b',
  // The reference kernel stores trunc(a / b) and 0 for a / 0 (ToInt32 of +-inf and NaN); WGSL's a / 0 is a.
  div: 'select(a / b, 0, b == 0)',
  maximum: 'select(b, a, a >= b)',
  minimum: 'select(b, a, a <= b)',
  eq: 'select(0, 1, a == b)',
  ne: 'select(0, 1, a != b)',
  lt: 'select(0, 1, a < b)',
  le: 'select(0, 1, a <= b)',
  gt: 'select(0, 1, a > b)',
  ge: 'select(0, 1, a >= b)',
};

export function unaryExpr(op: UnaryOp, dtype: DType): string {
  const t = wgslType(op, dtype);
  const e = t === 'f32' ? UNARY_KERNELS[op].wgsl : I32_UNARY[op];
  if (e === undefined) throw new DTypeError(op, `the WebGPU kernel ${op} is not defined for ${dtype}`);
  return e;
}

export function binaryExpr(op: BinaryOp, dtype: DType): string {
  const t = wgslType(op, dtype);
  const e = t === 'f32' ? BINARY_KERNELS[op].wgsl : I32_BINARY[op];
  if (e === undefined) throw new DTypeError(op, `the WebGPU kernel ${op} is not defined for ${dtype}`);
  return e;
}

type Mode = 'c' | 's' | 'b';

export function elementwise(
  rt: GpuRuntime,
  kernel: string,
  inputs: readonly EwInput[],
  expr: string,
  outShape: Shape,
  outDtype: DType,
): GPUBuffer {
  const outT = wgslType(kernel, outDtype);
  const n = sizeOf(outShape);
  const { shape, strides } = collapse(
    outShape,
    inputs.map((i) => broadcastStrides(i.x.shape, outShape)),
  );
  checkRank(kernel, shape.length);
  const modes: Mode[] = strides.map((s) => (s.every((v) => v === 0) ? 's' : isContiguous(shape, s) ? 'c' : 'b'));
  const rank = modes.includes('b') ? shape.length : 0;
  const types = inputs.map((i) => wgslType(kernel, i.x.dtype));
  const key = `ew:${outT}:${inputs.map((i, k) => `${i.name}/${types[k]}/${modes[k]}`).join(',')}:r${rank}:${expr}`;
  const program = cachedProgram(key, () => ({
    name: kernel,
    inputs: Object.fromEntries(types.map((t, k) => [`in${k}`, t])),
    outputs: { out: outT },
    uniforms: {
      n: 'u32',
      grid_x: 'u32',
      shape: 'array<vec4<u32>, 2>',
      operands: `array<vec4<u32>, ${3 * inputs.length}>`,
    },
    workgroupSize: 256,
    body: source(inputs, modes, rank, expr),
  }));
  // Per input: its offset (always 0 here: inputs are whole tensors) in the first vec4, then its 8 strides.
  const operands = strides.flatMap((s) => [0, 0, 0, 0, ...s, ...Array<number>(8 - s.length).fill(0)]);
  const [out] = launch(rt, program, {
    kernel,
    inputs: inputs.map((i) => i.x),
    outputs: [n * 4],
    grid: { threads: n },
    uniforms: { n, shape, operands },
  });
  return out;
}

function source(inputs: readonly EwInput[], modes: readonly Mode[], rank: number, expr: string): string {
  const strided = modes.flatMap((m, k) => (m === 'b' ? [k] : []));
  const offsets =
    strided.length === 0
      ? ''
      : [
          '  var rem = i;',
          ...strided.map((k) => `  var o${k} = in_offset(${k}u);`),
          '  for (var d = RANK; d > 0u; d--) {',
          '    let s = dim(d - 1u);',
          '    let c = rem % s;',
          '    rem = rem / s;',
          ...strided.map((k) => `    o${k} += c * in_stride(${k}u, d - 1u);`),
          '  }',
        ].join('\n');
  const loads = inputs
    .map(
      (inp, k) =>
        `  let ${inp.name} = in${k}[${modes[k] === 'c' ? 'i' : modes[k] === 's' ? `in_offset(${k}u)` : `o${k}`}];`,
    )
    .join('\n');
  const body = fillTemplate('elementwise.wgsl', template, { RANK: rank, OFFSETS: offsets, LOADS: loads, EXPR: expr });
  return `${prelude}\n${body}`;
}

registerKernels<GpuBackend>('webgpu', {
  cast: (b, x, dtype) => {
    // bf16/f16 cast to f32 only (the op refuses any other): unpacked by its own kernel.
    if (isHalf(x.dtype)) return asStorage(widenHalf(b.runtime, x));
    const t = wgslType('cast', dtype);
    return asStorage(elementwise(b.runtime, `cast.${x.dtype}.${dtype}`, [{ name: 'x', x }], `${t}(x)`, x.shape, dtype));
  },
  unary: (b, op, x) =>
    asStorage(elementwise(b.runtime, op, [{ name: 'x', x }], unaryExpr(op, x.dtype), x.shape, x.dtype)),
  binary: (b, op, x, y, outShape) => {
    const inputs = [
      { name: 'a', x },
      { name: 'b', x: y },
    ];
    return asStorage(elementwise(b.runtime, op, inputs, binaryExpr(op, x.dtype), outShape, x.dtype));
  },
  where: (b, cond, x, y, outShape) => {
    const zero = `${wgslType('where', cond.dtype)}(0)`;
    const inputs = [
      { name: 'cond', x: cond },
      { name: 'a', x },
      { name: 'b', x: y },
    ];
    return asStorage(elementwise(b.runtime, 'where', inputs, `select(b, a, cond != ${zero})`, outShape, x.dtype));
  },
});
