import type { KernelTensor } from '../../../core/backend.js';
import { registerKernels, type AdamWManyHyper } from '../../../core/kernels.js';
import { ArgumentError, DTypeError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import adamwManySrc from '../../../../shaders/adamw_many.wgsl';
import sumSquaresSrc from '../../../../shaders/sum_squares.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { launchSpec } from '../launch.js';
import { fillTemplate } from '../wgsl.js';
import { Words } from './layout.js';

/**
 * Multi-tensor kernels (as PyTorch's multi_tensor_apply, without pointers): each dispatch binds a chunk of as
 * many tensors as the device's storage-buffer limit allows, so a list of L leaves costs about
 * L / chunk dispatches instead of L (or 3 L for a norm and a clip).
 */
const PARTIALS = 64;

function chunks<T>(xs: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}

const storageLimit = (rt: GpuRuntime): number => rt.device.limits.maxStorageBuffersPerShaderStage;

const readBindings = (names: readonly string[], first: number, kind: 'read' | 'read_write'): string =>
  names.map((n, k) => `@group(0) @binding(${first + k}) var<storage, ${kind}> ${n}: array<f32>;`).join('\n');

/** sum of squares of every tensor: ceil(L / (limit - 1)) partial dispatches and one final one. */
export function sumSquares(rt: GpuRuntime, xs: readonly KernelTensor[]): GPUBuffer {
  for (const x of xs)
    if (x.dtype !== 'f32') throw new DTypeError('sumSquares', `the WebGPU kernel needs f32, got ${x.dtype}`);
  const groups = chunks(xs, storageLimit(rt) - 1);
  // Each chunk writes its PARTIALS workgroup sums into its own slice of one buffer; a last pass adds them up.
  let partials: GPUBuffer | null = null;
  for (const [c, group] of groups.entries()) {
    partials = dispatchSumSquares(
      rt,
      group.map((x) => bufferOf(x.storage)),
      group.map((x) => sizeOf(x.shape)),
      partials ?? groups.length * PARTIALS * 4,
      c * PARTIALS,
      PARTIALS,
      true,
    );
  }
  if (partials === null) throw new ArgumentError('sumSquares', 'no tensors');
  const out = dispatchSumSquares(rt, [partials], [groups.length * PARTIALS], 4, 0, 1, false);
  rt.release(partials);
  return out;
}

/** Workgroup w writes sum(x^2) (or sum(x) when not `square`: the final pass over partials) to out[first + w]. */
function dispatchSumSquares(
  rt: GpuRuntime,
  inputs: GPUBuffer[],
  sizes: number[],
  out: GPUBuffer | number,
  first: number,
  workgroups: number,
  square: boolean,
): GPUBuffer {
  const slots = inputs.length;
  const names = inputs.map((_, k) => `x${k}`);
  const body = names
    .map((n, k) =>
      [
        `for (var i = start; i < params.n[${k >> 2}][${k & 3}]; i += stride) {`,
        `    let e = ${n}[i];`,
        `    acc += ${square ? 'e * e' : 'e'};`,
        '  }',
      ].join('\n'),
    )
    .join('\n  ');
  const words = new Words(4 + 4 * Math.ceil(slots / 4)).u(0, first).u(1, workgroups);
  sizes.forEach((n, k) => words.u(4 + k, n));
  const [written] = launchSpec(rt, {
    kernel: 'sumSquares',
    key: `sum_squares:${slots}:${square}`,
    source: () =>
      fillTemplate('sum_squares.wgsl', sumSquaresSrc, {
        SLOTS: slots,
        SLOT_VEC4S: Math.ceil(slots / 4),
        BINDINGS: `${readBindings(names, 0, 'read')}\n${readBindings(['out'], slots, 'read_write')}`,
        UNIFORM: slots + 1,
        BODY: body,
        STORE: 'out[params.first_slot + wg.x] = red[0];',
      }),
    inputs,
    outputs: [out],
    uniforms: words.u32,
    grid: { workgroups: [workgroups, 1, 1] },
  });
  return written;
}

/** AdamW over every leaf, floor((limit - 1) / 7) leaves per dispatch (7 buffers each, plus the sum of squares). */
export function adamwMany(
  rt: GpuRuntime,
  params: readonly KernelTensor[],
  grads: readonly KernelTensor[],
  m: readonly KernelTensor[],
  v: readonly KernelTensor[],
  sumSq: KernelTensor | null,
  h: AdamWManyHyper,
): [GPUBuffer, GPUBuffer, GPUBuffer][] {
  for (const t of [...params, ...grads, ...m, ...v])
    if (t.dtype !== 'f32') throw new DTypeError('adamwMany', `the WebGPU kernel needs f32, got ${t.dtype}`);
  const outs: [GPUBuffer, GPUBuffer, GPUBuffer][] = [];
  const perChunk = Math.max(1, Math.floor((storageLimit(rt) - 1) / 7));
  const clip = sumSq !== null && h.maxNorm !== undefined;
  const indices = params.map((_, i) => i).filter((i) => sizeOf(params[i]!.shape) > 0);
  const sumBuffer = sumSq ? bufferOf(sumSq.storage) : bufferOf(params[indices[0] ?? 0]!.storage);
  for (const chunk of chunks(indices, perChunk)) {
    const slots = chunk.length;
    const largest = Math.max(...chunk.map((i) => sizeOf(params[i]!.shape)));
    const words = (gx: number): Words =>
      new Words(12 + 4 * slots)
        .u(0, gx * 256)
        .f(1, h.lr)
        .f(2, h.beta1)
        .f(3, h.beta2)
        .f(4, h.eps)
        .f(5, 1 - h.beta1 ** h.step)
        .f(6, 1 - h.beta2 ** h.step)
        .f(7, 1 - h.beta1)
        .f(8, 1 - h.beta2)
        .f(9, h.maxNorm ?? 0);
    const uniforms = ([gx]: readonly number[]): Uint32Array => {
      const w = words(gx!);
      chunk.forEach((i, k) => w.u(12 + 4 * k, sizeOf(params[i]!.shape)).f(13 + 4 * k, 1 - h.lr * h.weightDecays[i]!));
      return w.u32;
    };
    const names = chunk.flatMap((_, k) => [`p${k}`, `g${k}`, `m${k}`, `v${k}`]);
    const outNames = chunk.flatMap((_, k) => [`p${k}_out`, `m${k}_out`, `v${k}_out`]);
    const body = chunk
      .map((_, k) =>
        [
          `if (i < params.slot[${k}].x) {`,
          `    let r = update(g${k}[i] * scale, m${k}[i], v${k}[i], p${k}[i], bitcast<f32>(params.slot[${k}].y));`,
          `    p${k}_out[i] = r.x;`,
          `    m${k}_out[i] = r.y;`,
          `    v${k}_out[i] = r.z;`,
          '  }',
        ].join('\n'),
      )
      .join('\n  ');
    const written = launchSpec(rt, {
      kernel: 'adamwMany',
      key: `adamw_many:${slots}:${clip}`,
      source: () =>
        fillTemplate('adamw_many.wgsl', adamwManySrc, {
          SLOTS: slots,
          CLIP: clip,
          BINDINGS: `${readBindings(names, 1, 'read')}\n${readBindings(outNames, 1 + names.length, 'read_write')}`,
          UNIFORM: 1 + names.length + outNames.length,
          BODY: body,
        }),
      inputs: [
        sumBuffer,
        ...chunk.flatMap((i) => [params[i]!, grads[i]!, m[i]!, v[i]!].map((t) => bufferOf(t.storage))),
      ],
      outputs: chunk.flatMap((i) => [0, 1, 2].map(() => sizeOf(params[i]!.shape) * 4)),
      grid: { threads: largest, workgroupSize: 256 },
      uniforms,
    });
    chunk.forEach((i, k) => {
      outs[i] = [written[3 * k]!, written[3 * k + 1]!, written[3 * k + 2]!];
    });
  }
  // Empty leaves get empty buffers (no dispatch touched them).
  params.forEach((p, i) => {
    outs[i] ??= [0, 1, 2].map(() => rt.alloc(sizeOf(p.shape) * 4)) as [GPUBuffer, GPUBuffer, GPUBuffer];
  });
  return outs;
}

registerKernels<GpuBackend>('webgpu', {
  sumSquares: (b, xs) => asStorage(sumSquares(b.runtime, xs)),
  adamwMany: (b, params, grads, m, v, sumSq, hyper) =>
    adamwMany(b.runtime, params, grads, m, v, sumSq, hyper).map(([p, m1, v1]) => [
      asStorage(p),
      asStorage(m1),
      asStorage(v1),
    ]),
});
