import type { KernelTensor } from '../../../core/backend.js';
import { BackendError } from '../../../core/errors.js';
import { broadcastStrides, sizeOf, type Shape } from '../../../core/shape.js';
import { launch, prepareLaunch, type LaunchCall } from '../launch.js';
import { cachedProgram, checkInputs, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';
import splitSumSrc from '../../../../shaders/matmul_split_sum.wgsl';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillInto } from './movement.js';
import { collapse } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';
import { isHalf, type HalfDType } from '../../../core/dtype.js';
import { defaultConfig, fits, MATMUL_CANDIDATES, offered, type TileConfig } from './matmul-configs.js';
import { matmulProgram, type Variant } from './matmul-program.js';
import { agreeWithin, scratchValues } from './tune.js';
import type { TuneTrial } from '../tuner.js';

/**
 * The matmul kernel for 'webgpu': a case's configuration (a forced one, else the tuner's pick among the
 * candidates of matmul-configs.ts, with the trial that times them), its launch (the program of
 * matmul-program.ts for the case's variant, the grid and the batch strides) and the registration.
 */
let override: TileConfig | null = null;
let kindOverride: TileConfig['kind'] | null = null;
/** Force one configuration (benchmarks and tests of each variant); null restores the heuristic. */
export function setMatmulTileConfig(cfg: TileConfig | null): void {
  override = cfg;
}
/** Force the kernel family (its configuration still chosen by shape); null restores the adapter's choice. */
export function setMatmulKernel(kind: TileConfig['kind'] | null): void {
  kindOverride = kind;
}

/** Multiply-adds below which a class is not worth tuning: launch overhead, not the kernel, is its cost. */
const TUNE_MIN_MACS = 2 ** 20;

const log2Class = (x: number): number => Math.ceil(Math.log2(Math.max(1, x)));

/** A matmul's sizes and operands, as a launch needs them (a tensor, or a trial's scratch buffer). */
interface MatmulCase {
  readonly m: number;
  readonly n: number;
  readonly k: number;
  readonly transA: boolean;
  readonly transB: boolean;
  readonly halfB: HalfDType | null;
  readonly batchShape: Shape;
  readonly aBatch: Shape;
  readonly bBatch: Shape;
}

function variantOf(cfg: TileConfig, c: MatmulCase, addend = false): Variant {
  const { m, n, k } = c;
  return {
    addend,
    transA: c.transA,
    transB: c.transB,
    vecA: (c.transA ? m : k) % 4 === 0,
    vecB: (c.transB ? k : n) % 4 === 0,
    vecC: n % 4 === 0,
    halfB: c.halfB,
    full:
      cfg.kind === 'direct'
        ? m % cfg.rm === 0 && n % cfg.rn === 0 && k % 4 === 0
        : m % (cfg.wy * cfg.rm) === 0 && n % (cfg.wx * cfg.rn) === 0 && k % cfg.tk === 0,
  };
}

/** The K chunks of a split-K configuration on a case: whole K tiles each, at most `splitK` of them. */
function chunksOf(cfg: TileConfig, k: number): { splits: number; chunk: number } {
  if (!cfg.splitK) return { splits: 1, chunk: k };
  const chunk = Math.ceil(Math.ceil(k / cfg.splitK) / cfg.tk) * cfg.tk;
  return { splits: Math.ceil(k / chunk), chunk };
}

type MatmulLaunch = { readonly program: Program; readonly call: LaunchCall<readonly [number]> };
type Operand = KernelTensor | GPUBuffer;

/**
 * The launch of one configuration on a case: its program and call (one output: C, or with split-K over more than
 * one chunk the partial products [batch, splits, M, N]), and `sum`, the launch that adds those up (null without).
 * An addend `d` (C's layout) is added by whichever of the two writes C.
 */
function matmulLaunch(
  cfg: TileConfig,
  c: MatmulCase,
  a: Operand,
  b: Operand,
  d: Operand | null = null,
): MatmulLaunch & { readonly sum: ((partial: GPUBuffer) => MatmulLaunch) | null } {
  const { m, n, k } = c;
  const batch = sizeOf(c.batchShape);
  const bc = collapse(c.batchShape, [
    broadcastStrides(c.aBatch, c.batchShape).map((s) => s * m * k),
    broadcastStrides(c.bBatch, c.batchShape).map((s) => s * k * n),
  ]);
  if (bc.shape.length > 4)
    throw new BackendError('webgpu', `matmul: ${bc.shape.length} batch dims after merging exceed 4`);
  // Batch dims right-aligned in the vec4s, padded with size 1 (stride 0) in front.
  const pad = 4 - bc.shape.length;
  const { splits, chunk } = chunksOf(cfg, k);
  const storesC = splits === 1;
  return {
    program: matmulProgram(cfg, variantOf(cfg, c, storesC && d !== null)),
    call: {
      inputs: storesC && d ? [a, b, d] : [a, b],
      outputs: [m * n * batch * splits * 4],
      // A thread per RM x RN block: ceil(n / (WG_X RN)) x ceil(m / (WG_Y RM)) workgroups per batch entry and chunk.
      grid: { threads: [Math.ceil(n / cfg.rn), Math.ceil(m / cfg.rm), batch * splits] },
      uniforms: {
        M: m,
        N: n,
        K: k,
        batch: [...Array<number>(pad).fill(1), ...bc.shape],
        a_stride: [...Array<number>(pad).fill(0), ...bc.strides[0]!],
        b_stride: [...Array<number>(pad).fill(0), ...bc.strides[1]!],
        ...(cfg.splitK ? { splits, k_chunk: chunk } : {}),
      },
    },
    sum: splits > 1 ? (partial) => splitSumLaunch(c, partial, splits, d) : null,
  };
}

/** The sum of split-K's partial products, in chunk order (vec4s where M N allows), plus D if bound. */
const splitSumProgram = (vec4: boolean, addend: boolean): Program =>
  cachedProgram(`matmul_split_sum:${vec4 ? 'v4' : 's'}${addend ? ':d' : ''}`, () => {
    const t = vec4 ? 'vec4<f32>' : 'f32';
    return {
      name: 'matmul',
      inputs: { P: t, ...(addend ? { D: t } : {}) },
      outputs: { C: t },
      uniforms: { count: 'u32', mn: 'u32', splits: 'u32', grid_x: 'u32' },
      workgroupSize: 256,
      body: fillTemplate('matmul_split_sum.wgsl', splitSumSrc, { ADDEND: addend ? ' + D[t]' : '' }),
    };
  });

function splitSumLaunch(c: MatmulCase, partial: GPUBuffer, splits: number, d: Operand | null): MatmulLaunch {
  const batch = sizeOf(c.batchShape);
  const vec4 = (c.m * c.n) % 4 === 0;
  const mn = vec4 ? (c.m * c.n) / 4 : c.m * c.n;
  return {
    program: splitSumProgram(vec4, d !== null),
    call: {
      inputs: d ? [partial, d] : [partial],
      outputs: [c.m * c.n * batch * 4],
      grid: { threads: mn * batch },
      uniforms: { count: mn * batch, mn, splits },
    },
  };
}

/** A configuration's whole product C (+ D): one dispatch, or (split-K) the partial products and their sum. */
function runMatmul(
  rt: GpuRuntime,
  cfg: TileConfig,
  c: MatmulCase,
  a: Operand,
  b: Operand,
  d: Operand | null = null,
): GPUBuffer {
  const { program, call, sum } = matmulLaunch(cfg, c, a, b, d);
  const [out] = launch(rt, program, call);
  if (!sum) return out;
  const second = sum(out);
  const [summed] = launch(rt, second.program, second.call);
  rt.release(out);
  return summed;
}

/**
 * The tuning trial of a case (as tune.ts's `launchTrial`, with a split-K candidate's two dispatches): scratch
 * operands uploaded once, each candidate's C read back to be compared with the default's, its time the sum of
 * its dispatches' (`GpuRuntime.timeDispatch`).
 */
function matmulTrial(
  rt: GpuRuntime,
  t: MatmulCase,
  byName: (name: string) => TileConfig,
  operands: readonly ArrayBufferView[],
): TuneTrial {
  const [a, b] = operands.map((d) => rt.upload(d)) as [GPUBuffer, GPUBuffer];
  /** One launch's time and its output (the caller's to release; released here if the timing fails). */
  const timed = async ({ program, call }: MatmulLaunch, reps: number) => {
    const { outputs, dispatch } = prepareLaunch(rt, program, call);
    try {
      return { ms: dispatch ? await rt.timeDispatch(dispatch, reps) : 0, out: outputs[0] };
    } catch (e) {
      for (const o of outputs) rt.release(o);
      throw e;
    }
  };
  return {
    result: async (name) => {
      const out = runMatmul(rt, byName(name), t, a, b);
      try {
        return new Float32Array(await rt.read(out, t.m * t.n * sizeOf(t.batchShape) * 4));
      } finally {
        rt.release(out);
      }
    },
    time: async (name, reps) => {
      const first = matmulLaunch(byName(name), t, a, b);
      const product = await timed(first, reps);
      try {
        if (!first.sum) return product.ms;
        const summed = await timed(first.sum(product.out), reps);
        rt.release(summed.out);
        return product.ms + summed.ms;
      } finally {
        rt.release(product.out);
      }
    },
    // Every configuration sums the K products in the same order with FMAs but split-K, which adds its chunks'
    // sums; allow an f32 rounding a term.
    agree: agreeWithin(1e-6 * t.k, 1e-6),
    dispose: () => {
      rt.release(a);
      rt.release(b);
    },
  };
}

/**
 * The configuration for a case: a forced one, else the tuner's pick among the family's candidates that fit
 * the device (the heuristic's default first) for the case's class: transposes, vec4 operands, half B, and
 * M, N, K and the batch by powers of two.
 */
function configFor(rt: GpuRuntime, c: MatmulCase): TileConfig {
  if (override) return override;
  const cpuLike = kindOverride ? kindOverride === 'direct' : rt.cpuLike;
  const batch = sizeOf(c.batchShape);
  const fallback = defaultConfig(cpuLike, c.m, c.n, batch);
  const { m, n, k } = c;
  if (m * n * k * batch < TUNE_MIN_MACS || !rt.tuner.enabled) return fallback;
  const family = MATMUL_CANDIDATES[cpuLike ? 'direct' : 'tiled'];
  const limits = rt.device.limits;
  const candidates = [
    fallback,
    ...family.filter((cfg) => cfg !== fallback && fits(cfg, limits) && offered(cfg, m, n, k, batch)),
  ];
  const v = variantOf(fallback, c);
  const flags = `${+v.transA}${+v.transB}${+v.vecA}${+v.vecB}${+v.vecC}${v.halfB ?? ''}`;
  const name = rt.tuner.pick({
    kernel: 'matmul',
    // `:sk`: split-K candidates offered (an older cache's choice without them is not reused).
    shapeClass:
      `${fallback.kind}:${flags}:m${log2Class(m)}:n${log2Class(n)}:k${log2Class(k)}:b${log2Class(batch)}` +
      (candidates.some((cfg) => cfg.splitK) ? ':sk' : ''),
    candidates: candidates.map((cfg) => cfg.name),
    trial: () => {
      const byName = (chosen: string): TileConfig => candidates.find((cfg) => cfg.name === chosen)!;
      const trialOf = (t: MatmulCase) => {
        const av = scratchValues(sizeOf(t.aBatch) * t.m * t.k, 1);
        const bv = scratchValues(sizeOf(t.bBatch) * t.k * t.n, 2);
        // A half B: the top halves of the f32 words (bf16 by truncation; read as f16, |x| < 1 stays finite).
        return matmulTrial(rt, t, byName, [av, t.halfB ? packWords(bv) : bv]);
      };
      // Timed on the case met; compared on one whose M and N are capped near 2048 with the same residues
      // modulo 128 (every tile divides 128: the same bounds-check variant), so a 151,936-wide product is not
      // read back to the host once per candidate.
      const cap = (x: number): number => (x > 2048 ? 2048 + (x % 128) : x);
      const timed = trialOf(c);
      const compared = cap(m) === m && cap(n) === n ? timed : trialOf({ ...c, m: cap(m), n: cap(n) });
      return {
        result: compared.result,
        time: timed.time,
        agree: compared.agree,
        dispose: () => {
          timed.dispose();
          if (compared !== timed) compared.dispose();
        },
      };
    },
  });
  return candidates.find((cfg) => cfg.name === name) ?? fallback;
}

/** f32 values as 16-bit halves (their top halves), two per u32 word, as half storage holds them. */
function packWords(values: Float32Array): Uint32Array {
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const out = new Uint32Array(Math.ceil(values.length / 2));
  for (let i = 0; i < values.length; i++) out[i >> 1]! |= (bits[i]! >>> 16) << (16 * (i & 1));
  return out;
}

export function matmul(
  rt: GpuRuntime,
  a: KernelTensor,
  b: KernelTensor,
  transA: boolean,
  transB: boolean,
  outShape: Shape,
  addend: KernelTensor | null = null,
): GPUBuffer {
  const r = outShape.length;
  const m = outShape[r - 2]!;
  const n = outShape[r - 1]!;
  const k = transA ? a.shape[a.shape.length - 2]! : a.shape[a.shape.length - 1]!;
  const batchShape = outShape.slice(0, -2);
  const batch = sizeOf(batchShape);
  const c: MatmulCase = {
    m,
    n,
    k,
    transA,
    transB,
    halfB: isHalf(b.dtype) ? (b.dtype as HalfDType) : null,
    batchShape,
    aBatch: a.shape.slice(0, -2),
    bBatch: b.shape.slice(0, -2),
  };
  const fallback = defaultConfig(kindOverride ? kindOverride === 'direct' : rt.cpuLike, m, n, batch);
  const checked = override ?? fallback;
  const inputs = addend ? [a, b, addend] : [a, b];
  checkInputs(matmulProgram(checked, variantOf(checked, c, addend !== null)), 'matmul', inputs);
  if (m * n * batch === 0) return rt.alloc(0);
  if (k === 0 && !addend) return fillInto(rt, m * n * batch * 4, m * n * batch, 'f32', 0);
  if (batch > rt.maxWorkgroupsPerDim)
    throw new BackendError('webgpu', `matmul: batch ${batch} exceeds ${rt.maxWorkgroupsPerDim} workgroups`);
  // An empty K with an addend: the default's kernel, whose K loop takes no step and whose store adds D. Else the
  // configuration tuned for the product alone (an addend adds one read a stored element).
  return runMatmul(rt, k === 0 ? fallback : configFor(rt, c), c, a, b, addend);
}

registerKernels<GpuBackend>('webgpu', {
  matmul: (b, x, y, transA, transB, outShape, addend) =>
    asStorage(matmul(b.runtime, x, y, transA, transB, outShape, addend)),
});
