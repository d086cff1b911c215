import type { KernelTensor, Storage } from '../../../core/backend.js';
import { adamwStepValues, registerKernels, type AdamWInPlace, type AdamWManyHyper } from '../../../core/kernels.js';
import { ArgumentError } from '../../../core/errors.js';
import { sizeOf } from '../../../core/shape.js';
import adamwManySrc from '../../../../shaders/adamw_many.wgsl';
import sumSquaresSrc from '../../../../shaders/sum_squares.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage, bufferOf } from '../storage.js';
import { launch } from '../launch.js';
import { bitsOf, cachedProgram, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';

/**
 * Multi-tensor kernels (as PyTorch's multi_tensor_apply, without pointers): each dispatch binds a chunk of as
 * many tensors as the device's storage-buffer limit allows, so a list of L leaves costs about
 * L / chunk dispatches instead of L (or 3 L for a norm and a clip).
 */
/**
 * Workgroups (partial sums) of one sum-of-squares dispatch. 64 kept an H100 at 180 GB/s over a 0.6B model's
 * gradients (13 ms of a step, bench/results/gpu-h100-2026-11-28): a memory-bound pass needs many more loads in
 * flight. The last pass adds them up in one workgroup.
 */
const PARTIALS = 1024;

function chunks<T>(xs: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += size) out.push(xs.slice(i, i + size));
  return out;
}

const storageLimit = (rt: GpuRuntime): number => rt.device.limits.maxStorageBuffersPerShaderStage;

const f32Bindings = (names: readonly string[]): Record<string, 'f32'> =>
  Object.fromEntries(names.map((n) => [n, 'f32' as const]));

/** sum of squares of every tensor: ceil(L / (limit - 1)) partial dispatches and one final one. */
export function sumSquares(rt: GpuRuntime, xs: readonly KernelTensor[]): GPUBuffer {
  const groups = chunks(xs, storageLimit(rt) - 1);
  // Each chunk writes its PARTIALS workgroup sums into its own slice of one buffer; a last pass adds them up.
  let partials: GPUBuffer | null = null;
  for (const [c, group] of groups.entries()) {
    partials = dispatchSumSquares(
      rt,
      group,
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

/** Sums of squares (or of values: the final pass over partials) of `slots` tensors. */
const sumSquaresProgram = (slots: number, square: boolean): Program =>
  cachedProgram(`sum_squares:${slots}:${square}`, () => {
    const names = Array.from({ length: slots }, (_, k) => `x${k}`);
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
    return {
      name: 'sumSquares',
      inputs: f32Bindings(names),
      outputs: { out: 'f32' },
      uniforms: { first_slot: 'u32', workgroups: 'u32', n: `array<vec4<u32>, ${Math.ceil(slots / 4)}>` },
      workgroupSize: 256,
      body: fillTemplate('sum_squares.wgsl', sumSquaresSrc, { BODY: body }),
    };
  });

/** Workgroup w writes sum(x^2) (or sum(x) when not `square`: the final pass over partials) to out[first + w]. */
function dispatchSumSquares(
  rt: GpuRuntime,
  inputs: readonly (KernelTensor | GPUBuffer)[],
  sizes: number[],
  out: GPUBuffer | number,
  first: number,
  workgroups: number,
  square: boolean,
): GPUBuffer {
  const [written] = launch(rt, sumSquaresProgram(inputs.length, square), {
    inputs,
    outputs: [out],
    grid: { workgroups: [workgroups, 1, 1] },
    uniforms: { first_slot: first, workgroups, n: sizes },
  });
  return written;
}

/** Which of a slot's p, m and v the dispatch updates in place: their input is not bound, their output is read. */
type SlotInPlace = readonly [param: boolean, m: boolean, v: boolean];
const NONE: SlotInPlace = [false, false, false];
const TENSORS = ['p', 'm', 'v'] as const;

/** A slot's input bindings in order, p, g, m, v, without those updated in place (bound as outputs only). */
const slotInputs = <T>(flags: SlotInPlace, [p, g, m, v]: readonly [T, T, T, T]): T[] => [
  ...(flags[0] ? [] : [p]),
  g,
  ...(flags[1] ? [] : [m]),
  ...(flags[2] ? [] : [v]),
];

/**
 * AdamW over `slots` leaves in one dispatch, with or without the clip factor, with the step's values as uniforms or
 * read from a schedule tensor (`scheduled`). A tensor updated in place is bound once, read_write, as its output
 * (WebGPU refuses a buffer bound both read-only and writable in one dispatch), and read from there: each thread
 * reads element i before it writes element i, and no other thread touches it.
 */
const adamwManyProgram = (clip: boolean, scheduled: boolean, inPlace: readonly SlotInPlace[]): Program =>
  cachedProgram(`adamw_many:${clip}:${scheduled}:${inPlace.map((s) => s.map(Number).join('')).join(',')}`, () => {
    const ks = inPlace.map((_, k) => k);
    const read = (k: number, t: number): string => `${TENSORS[t]}${k}${inPlace[k]![t] ? '_out' : ''}[i]`;
    // A slot's decay factor: its own uniform, or with a schedule the schedule's where the slot is decayed.
    const decay = (k: number): string =>
      scheduled ? `select(1.0, sched[3], params.slot[${k}].y != 0u)` : `bitcast<f32>(params.slot[${k}].y)`;
    const body = ks
      .map((k) =>
        [
          `if (i < params.slot[${k}].x) {`,
          `    let r = update(g${k}[i] * scale, ${read(k, 1)}, ${read(k, 2)}, ${read(k, 0)}, ${decay(k)}, lr, c1, c2);`,
          `    p${k}_out[i] = r.x;`,
          `    m${k}_out[i] = r.y;`,
          `    v${k}_out[i] = r.z;`,
          '  }',
        ].join('\n'),
      )
      .join('\n  ');
    const stepValues = scheduled
      ? 'let lr = sched[0];\n  let c1 = sched[1];\n  let c2 = sched[2];'
      : 'let lr = params.lr;\n  let c1 = params.c1;\n  let c2 = params.c2;';
    const bound = (k: number): string[] => slotInputs(inPlace[k]!, [`p${k}`, `g${k}`, `m${k}`, `v${k}`]);
    return {
      name: 'adamwMany',
      inputs: f32Bindings(['sum_sq', ...(scheduled ? ['sched'] : []), ...ks.flatMap(bound)]),
      outputs: f32Bindings(ks.flatMap((k) => [`p${k}_out`, `m${k}_out`, `v${k}_out`])),
      uniforms: {
        grid_x: 'u32',
        lr: 'f32',
        beta1: 'f32',
        beta2: 'f32',
        eps: 'f32',
        c1: 'f32',
        c2: 'f32',
        one_minus_beta1: 'f32',
        one_minus_beta2: 'f32',
        max_norm: 'f32',
        // (n, bits of 1 - lr wd or, with a schedule, whether the slot is decayed, 0, 0)
        slot: `array<vec4<u32>, ${inPlace.length}>`,
      },
      workgroupSize: 256,
      body: fillTemplate('adamw_many.wgsl', adamwManySrc, { CLIP: clip, STEP_VALUES: stepValues, BODY: body }),
    };
  });

/**
 * AdamW over every leaf, floor((limit - 1) / 7) leaves per dispatch (7 buffers each, plus the sum of squares);
 * `inPlace` (one per leaf) names the tensors whose own buffer takes the update.
 */
export function adamwMany(
  rt: GpuRuntime,
  params: readonly KernelTensor[],
  grads: readonly KernelTensor[],
  m: readonly KernelTensor[],
  v: readonly KernelTensor[],
  sumSq: KernelTensor | null,
  h: AdamWManyHyper,
  inPlace?: readonly AdamWInPlace[],
): [GPUBuffer, GPUBuffer, GPUBuffer][] {
  const outs: [GPUBuffer, GPUBuffer, GPUBuffer][] = [];
  const schedule = h.schedule ?? null;
  const step = adamwStepValues(h, null, 0);
  const perChunk = Math.max(1, Math.floor((storageLimit(rt) - (schedule ? 2 : 1)) / 7));
  const clip = sumSq !== null && h.maxNorm !== undefined;
  const flags = (i: number): SlotInPlace => {
    const at = inPlace?.[i];
    return at ? [at.param, at.m, at.v] : NONE;
  };
  const indices = params.map((_, i) => i).filter((i) => sizeOf(params[i]!.shape) > 0);
  // Without clipping the kernel never reads sum_sq, so whichever f32 tensor is at hand fills the binding: a
  // gradient, which no slot writes.
  const sumBinding = sumSq ?? grads[indices[0] ?? 0]!;
  for (const chunk of chunks(indices, perChunk)) {
    const largest = Math.max(...chunk.map((i) => sizeOf(params[i]!.shape)));
    const slotIn = (i: number): KernelTensor[] => slotInputs(flags(i), [params[i]!, grads[i]!, m[i]!, v[i]!]);
    const slotOut = (i: number): (number | GPUBuffer)[] =>
      [params[i]!, m[i]!, v[i]!].map((x, t) => (flags(i)[t] ? bufferOf(x.storage) : sizeOf(x.shape) * 4));
    const written = launch(rt, adamwManyProgram(clip, schedule !== null, chunk.map(flags)), {
      inputs: [sumBinding, ...(schedule ? [schedule] : []), ...chunk.flatMap(slotIn)],
      outputs: chunk.flatMap(slotOut),
      grid: { threads: largest },
      uniforms: {
        // With a schedule these come from the device, and the block stays the same from step to step.
        lr: schedule ? 0 : step.lr,
        beta1: h.beta1,
        beta2: h.beta2,
        eps: h.eps,
        c1: schedule ? 0 : step.c1,
        c2: schedule ? 0 : step.c2,
        one_minus_beta1: 1 - h.beta1,
        one_minus_beta2: 1 - h.beta2,
        max_norm: h.maxNorm ?? 0,
        slot: chunk.flatMap((i) => [
          sizeOf(params[i]!.shape),
          schedule
            ? Number(h.weightDecays[i] !== 0)
            : bitsOf('f32', adamwStepValues(h, null, h.weightDecays[i]!).decay),
          0,
          0,
        ]),
      },
    });
    chunk.forEach((i, k) => {
      outs[i] = [written[3 * k]!, written[3 * k + 1]!, written[3 * k + 2]!];
    });
  }
  // Empty leaves get empty buffers (no dispatch touched them), or keep their own where updated in place.
  params.forEach((p, i) => {
    outs[i] ??= [p, m[i]!, v[i]!].map((x, t) =>
      flags(i)[t] ? bufferOf(x.storage) : rt.alloc(sizeOf(p.shape) * 4),
    ) as [GPUBuffer, GPUBuffer, GPUBuffer];
  });
  return outs;
}

registerKernels<GpuBackend>('webgpu', {
  sumSquares: (b, xs) => asStorage(sumSquares(b.runtime, xs)),
  adamwMany: (b, params, grads, m, v, sumSq, hyper, inPlace) =>
    adamwMany(b.runtime, params, grads, m, v, sumSq, hyper, inPlace).map(([p1, m1, v1], i) => {
      // An output updated in place is its input's storage (the op layer checks that it is the same one).
      const at = inPlace?.[i];
      const own = (x: KernelTensor, over: boolean | undefined, buffer: GPUBuffer): Storage =>
        over ? x.storage : asStorage(buffer);
      return [own(params[i]!, at?.param, p1), own(m[i]!, at?.m, m1), own(v[i]!, at?.v, v1)];
    }),
});
