import type { KernelTensor } from '../../../core/backend.js';
import { BackendError } from '../../../core/errors.js';
import { broadcastStrides, sizeOf, type Shape } from '../../../core/shape.js';
import matmulSrc from '../../../../shaders/matmul.wgsl';
import directSrc from '../../../../shaders/matmul_direct.wgsl';
import { launch, type LaunchCall } from '../launch.js';
import { cachedProgram, checkInputs, type Program } from '../program.js';
import type { GpuBackend, GpuRuntime } from '../runtime.js';
import { asStorage } from '../storage.js';
import { fillTemplate } from '../wgsl.js';
import { fillInto } from './movement.js';
import { collapse } from './layout.js';
import { registerKernels } from '../../../core/kernels.js';
import { isHalf, type HalfDType } from '../../../core/dtype.js';
import { halfBinding, halfReaders } from './half.js';
import { agreeWithin, launchTrial, scratchValues } from './tune.js';

/**
 * Launcher of the matmul kernels: the tiled kernel with workgroup memory (shaders/matmul.wgsl), used on GPUs,
 * and the register-blocked kernel without it (shaders/matmul_direct.wgsl), used on CPU-emulated adapters such
 * as llvmpipe, where workgroup memory is ordinary memory and staging only costs. A pipeline variant is generated
 * per configuration, transposes, which operands are read as vec4 (their contiguous dimension a multiple of 4),
 * and whether bounds checks are needed (compiled out when M, N, K divide the tile or block).
 */
export interface TileConfig {
  readonly name: string;
  /** `tiled`: workgroup-memory tiles of (wy rm) x (wx rn), tk deep. `direct`: no workgroup memory. */
  readonly kind: 'tiled' | 'direct';
  /** Threads per workgroup along N (x) and M (y). */
  readonly wx: number;
  readonly wy: number;
  /** Outputs per thread along M (multiple of 4) and N (multiple of 4). */
  readonly rm: number;
  readonly rn: number;
  /** Depth of a K tile (tiled only). */
  readonly tk: number;
  /** Tiled only: a thread's vec4 columns spread WG_X apart instead of adjacent (conflict-free, coalesced). */
  readonly spread?: boolean;
  /** Tiled only: the next K tile is read into registers while the current one is multiplied. */
  readonly prefetch?: boolean;
}

/** GPU: 64x64 tiles, 16x16 threads with 4x4 outputs each, K tiles of 16. */
export const LARGE: TileConfig = { name: 'L', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16 };
/** GPU: 32x32 tiles, 8x8 threads with 4x4 outputs each (more workgroups for small outputs). */
export const SMALL: TileConfig = { name: 'S', kind: 'tiled', wx: 8, wy: 8, rm: 4, rn: 4, tk: 16 };
/** CPU-emulated adapters: 8x8 outputs per thread (large outputs). */
export const DIRECT_LARGE: TileConfig = { name: 'DL', kind: 'direct', wx: 8, wy: 8, rm: 8, rn: 8, tk: 4 };
/** CPU-emulated adapters: 4x4 outputs per thread (narrow outputs, such as logits over a small vocabulary). */
export const DIRECT_SMALL: TileConfig = { name: 'DS', kind: 'direct', wx: 8, wy: 8, rm: 4, rn: 4, tk: 4 };

/**
 * The candidates the tuner (tuner.ts) times per shape class, beside the two defaults of each family: more
 * outputs per thread (8x8: 16 vec4 FMAs per 4 vec4 loads from workgroup memory, against 4 per 2 at 4x4, the
 * register blocking of large-tile GPU kernels such as tfjs's and CUTLASS's), taller or wider tiles, fewer
 * threads, deeper or shallower K tiles, and a thread's columns spread across the tile (`spread`: a warp reads
 * consecutive vec4s of the B tile and writes consecutive vec4s of C, as siboehm's SGEMM steps do). Every one is a correctness case of spec/webgpu/matmul.spec.ts.
 */
export const MATMUL_CANDIDATES: Readonly<Record<TileConfig['kind'], readonly TileConfig[]>> = {
  tiled: [
    LARGE,
    SMALL,
    { name: 'XL', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 8 },
    { name: 'XLk16', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 16 },
    { name: 'Tall', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 4, tk: 16 },
    { name: 'Wide', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 8, tk: 16 },
    { name: 'M8', kind: 'tiled', wx: 8, wy: 8, rm: 8, rn: 8, tk: 16 },
    { name: 'Lk32', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 32 },
    { name: 'Ls', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true },
    { name: 'XLs', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 8, spread: true },
    { name: 'XLk16s', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 16, spread: true },
    // K tiles of 32: a row of a row-major A tile is 128 bytes, one whole memory transaction (32 KiB of tiles).
    { name: 'XLk32s', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 32, spread: true },
    // The next K tile read into registers while this one is multiplied: global latency behind the FMAs.
    { name: 'XLk16sp', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 16, spread: true, prefetch: true },
    { name: 'XLk32sp', kind: 'tiled', wx: 16, wy: 16, rm: 8, rn: 8, tk: 32, spread: true, prefetch: true },
    { name: 'Lsp', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true },
  ],
  direct: [
    DIRECT_LARGE,
    DIRECT_SMALL,
    { name: 'DM', kind: 'direct', wx: 8, wy: 8, rm: 4, rn: 8, tk: 4 },
    { name: 'DW', kind: 'direct', wx: 16, wy: 4, rm: 8, rn: 8, tk: 4 },
    { name: 'DT', kind: 'direct', wx: 4, wy: 16, rm: 8, rn: 4, tk: 4 },
  ],
};

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

/** The fixed heuristic: the default the tuner starts from, and the choice with RLVR_TUNE=off. */
function defaultConfig(cpuLike: boolean, m: number, n: number, batch: number): TileConfig {
  // Measured on llvmpipe (bench/RESULTS.md): 8x8 outputs per thread wins at every policy shape; 4x4 only
  // wastes less on matrix-vector shapes.
  if (cpuLike) return m < 8 || n < 8 ? DIRECT_SMALL : DIRECT_LARGE;
  // Prefer the large tile unless it would leave too few workgroups to fill the device.
  const large = Math.ceil(m / 64) * Math.ceil(n / 64) * batch;
  return large >= 16 ? LARGE : SMALL;
}

/** Whether a configuration fits the device's workgroup limits (a candidate that does not is never offered). */
export function fits(cfg: TileConfig, limits: GPUSupportedLimits): boolean {
  const storage = cfg.kind === 'tiled' ? 4 * cfg.tk * (cfg.wy * cfg.rm + cfg.wx * cfg.rn) : 0;
  return (
    cfg.wx * cfg.wy <= limits.maxComputeInvocationsPerWorkgroup &&
    cfg.wx <= limits.maxComputeWorkgroupSizeX &&
    cfg.wy <= limits.maxComputeWorkgroupSizeY &&
    storage <= limits.maxComputeWorkgroupStorageSize
  );
}

/** Multiply-adds below which a class is not worth tuning: launch overhead, not the kernel, is its cost. */
const TUNE_MIN_MACS = 2 ** 20;

const log2Class = (x: number): number => Math.ceil(Math.log2(Math.max(1, x)));

interface Variant {
  readonly transA: boolean;
  readonly transB: boolean;
  readonly vecA: boolean;
  readonly vecB: boolean;
  readonly vecC: boolean;
  readonly full: boolean;
  /** B is a frozen bf16/f16 weight, two elements per u32 word, widened as each load reads it (null: f32). */
  readonly halfB: HalfDType | null;
}

/**
 * The loads of B: a vec4 of elements i..i+3, or element i. For a half B they read packed words and widen them
 * (kernels/half.ts), giving the same f32 values in the same places, so the arithmetic is the f32 kernel's.
 */
const bVec4 = (v: Variant, i: string): string => (v.halfB ? `B_vec4(${i})` : `B[(${i}) / 4u]`);
const bAt = (v: Variant, i: string): string => (v.halfB ? `B_at(${i})` : `B[${i}]`);

const guard = (full: boolean, cond: string, body: string): string =>
  full ? `    ${body}` : `    if (${cond}) {\n      ${body}\n    }`;

/**
 * One tile loader of the tiled kernel: each thread takes every WG-th element (or vec4) of the tile, computes its
 * indices, reads it from global memory (zero outside the matrix) into `val` and stores `val` into the tile.
 * The same parts make the plain loader (`load_a`, one loop) and the prefetching one (`fetch_a` into registers
 * for the next K tile while the current one is multiplied, then `put_a` into workgroup memory).
 */
interface Loader {
  /** The tile's elements or vec4s: a WGSL constant expression. */
  readonly count: string;
  readonly type: 'vec4<f32>' | 'f32';
  /** Statements computing indices from v, m0 / n0 and k0. */
  readonly index: string;
  /** The (guarded) read into `val`. */
  readonly load: string;
  /** Statements storing `val` into the tile. */
  readonly store: string;
}

function loaderA(v: Variant): Loader {
  if (!v.transA && v.vecA) {
    return {
      count: 'TM * TK / 4u',
      type: 'vec4<f32>',
      index: `    let m = v / (TK / 4u);
    let kq = v % (TK / 4u);
    let gm = m0 + m;
    let gk = k0 + 4u * kq;`,
      load: guard(v.full, 'gm < params.M && gk < params.K', 'val = A[(a_off + gm * params.K + gk) / 4u];'),
      store: `    let s = 4u * kq * TM4 + m / 4u;
    let c = m % 4u;
    As[s][c] = val.x;
    As[s + TM4][c] = val.y;
    As[s + 2u * TM4][c] = val.z;
    As[s + 3u * TM4][c] = val.w;`,
    };
  }
  if (!v.transA) {
    return {
      count: 'TM * TK',
      type: 'f32',
      index: `    let m = v / TK;
    let k = v % TK;
    let gm = m0 + m;
    let gk = k0 + k;`,
      load: guard(v.full, 'gm < params.M && gk < params.K', 'val = A[a_off + gm * params.K + gk];'),
      store: '    As[k * TM4 + m / 4u][m % 4u] = val;',
    };
  }
  if (v.vecA) {
    return {
      count: 'TK * TM4',
      type: 'vec4<f32>',
      index: `    let k = v / TM4;
    let mq = v % TM4;
    let gm = m0 + 4u * mq;
    let gk = k0 + k;`,
      load: guard(v.full, 'gm < params.M && gk < params.K', 'val = A[(a_off + gk * params.M + gm) / 4u];'),
      store: '    As[k * TM4 + mq] = val;',
    };
  }
  return {
    count: 'TK * TM',
    type: 'f32',
    index: `    let k = v / TM;
    let m = v % TM;
    let gm = m0 + m;
    let gk = k0 + k;`,
    load: guard(v.full, 'gm < params.M && gk < params.K', 'val = A[a_off + gk * params.M + gm];'),
    store: '    As[k * TM4 + m / 4u][m % 4u] = val;',
  };
}

function loaderB(v: Variant): Loader {
  if (!v.transB && v.vecB) {
    return {
      count: 'TK * TN4',
      type: 'vec4<f32>',
      index: `    let k = v / TN4;
    let nq = v % TN4;
    let gn = n0 + 4u * nq;
    let gk = k0 + k;`,
      load: guard(v.full, 'gk < params.K && gn < params.N', `val = ${bVec4(v, 'b_off + gk * params.N + gn')};`),
      store: '    Bs[k * TN4 + nq] = val;',
    };
  }
  if (!v.transB) {
    return {
      count: 'TK * TN',
      type: 'f32',
      index: `    let k = v / TN;
    let n = v % TN;
    let gn = n0 + n;
    let gk = k0 + k;`,
      load: guard(v.full, 'gk < params.K && gn < params.N', `val = ${bAt(v, 'b_off + gk * params.N + gn')};`),
      store: '    Bs[k * TN4 + n / 4u][n % 4u] = val;',
    };
  }
  if (v.vecB) {
    return {
      count: 'TN * TK / 4u',
      type: 'vec4<f32>',
      index: `    let n = v / (TK / 4u);
    let kq = v % (TK / 4u);
    let gn = n0 + n;
    let gk = k0 + 4u * kq;`,
      load: guard(v.full, 'gk < params.K && gn < params.N', `val = ${bVec4(v, 'b_off + gn * params.K + gk')};`),
      store: `    let s = 4u * kq * TN4 + n / 4u;
    let c = n % 4u;
    Bs[s][c] = val.x;
    Bs[s + TN4][c] = val.y;
    Bs[s + 2u * TN4][c] = val.z;
    Bs[s + 3u * TN4][c] = val.w;`,
    };
  }
  return {
    count: 'TN * TK',
    type: 'f32',
    index: `    let n = v / TK;
    let k = v % TK;
    let gn = n0 + n;
    let gk = k0 + k;`,
    load: guard(v.full, 'gk < params.K && gn < params.N', `val = ${bAt(v, 'b_off + gn * params.K + gk')};`),
    store: '    Bs[k * TN4 + n / 4u][n % 4u] = val;',
  };
}

const zero = (type: Loader['type']): string => (type === 'f32' ? '0.0' : 'vec4<f32>(0.0)');
const deeper = (lines: string): string => lines.replace(/^/gm, '    ');

/** The plain loader: one loop staging a whole tile. */
const tileLoop = (l: Loader): string =>
  `  for (var v = tid; v < ${l.count}; v += WG) {\n${l.index}\n    var val = ${zero(l.type)};\n${l.load}\n${l.store}\n  }`;

/** Registers of the prefetching loader (`regs`, one per element a thread stages), and its fetch and put. */
function prefetch(l: Loader, regs: string): { decl: string; fetch: string; put: string } {
  const each = (body: string): string =>
    `  for (var r = 0u; r < ${regs}_N; r++) {\n    let v = tid + r * WG;\n    if (v < ${l.count}) {\n${body}\n    }\n  }`;
  return {
    decl: `const ${regs}_N: u32 = (${l.count} + WG - 1u) / WG;\nvar<private> ${regs}: array<${l.type}, ${regs}_N>;`,
    fetch: each(`${deeper(l.index)}\n      var val = ${zero(l.type)};\n${deeper(l.load)}\n      ${regs}[r] = val;`),
    put: each(`${deeper(l.index)}\n      let val = ${regs}[r];\n${deeper(l.store)}`),
  };
}

function store(v: Variant): string {
  const ind = '      ';
  if (v.vecC) {
    const body = 'C[(c_off + m * params.N + n) / 4u] = v;';
    return v.full ? `${ind}${body}` : `${ind}if (m < params.M && n < params.N) {\n${ind}  ${body}\n${ind}}`;
  }
  return `${ind}for (var c = 0u; c < 4u; c++) {
${ind}  if (m < params.M && n + c < params.N) {
${ind}    C[c_off + m * params.N + n + c] = v[c];
${ind}  }
${ind}}`;
}

const TRANSPOSE4 = `  return array<vec4<f32>, 4>(
    vec4<f32>(t[0].x, t[1].x, t[2].x, t[3].x),
    vec4<f32>(t[0].y, t[1].y, t[2].y, t[3].y),
    vec4<f32>(t[0].z, t[1].z, t[2].z, t[3].z),
    vec4<f32>(t[0].w, t[1].w, t[2].w, t[3].w));`;

function directLoadA(v: Variant): string {
  if (!v.transA && v.vecA) {
    // Rows m..m+3 of A, each a vec4 along k.
    return `  var rows: array<vec4<f32>, 4>;
  for (var c = 0u; c < 4u; c++) {
    if (${v.full ? 'true' : 'm + c < params.M && k < params.K'}) {
      rows[c] = A[(a_off + (m + c) * params.K + k) / 4u];
    }
  }
  return rows;`;
  }
  if (v.transA && v.vecA) {
    // A is stored [K, M]: rows k..k+3 of it, each a vec4 over m..m+3, transposed into rows of op(A).
    return `  var t: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) {
    if (${v.full ? 'true' : 'k + i < params.K && m < params.M'}) {
      t[i] = A[(a_off + (k + i) * params.M + m) / 4u];
    }
  }
${TRANSPOSE4}`;
  }
  const at = v.transA ? 'a_off + (k + i) * params.M + m + c' : 'a_off + (m + c) * params.K + k + i';
  return `  var rows: array<vec4<f32>, 4>;
  for (var c = 0u; c < 4u; c++) {
    for (var i = 0u; i < 4u; i++) {
      if (m + c < params.M && k + i < params.K) {
        rows[c][i] = A[${at}];
      }
    }
  }
  return rows;`;
}

function directLoadB(v: Variant): string {
  if (!v.transB && v.vecB) {
    const row = (i: number): string => bVec4(v, `b_off + (k + ${i}u) * params.N + n`);
    if (v.full) return `  return array<vec4<f32>, 4>(${[0, 1, 2, 3].map(row).join(', ')});`;
    return `  var rows: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) {
    if (k + i < params.K && n < params.N) {
      rows[i] = ${bVec4(v, 'b_off + (k + i) * params.N + n')};
    }
  }
  return rows;`;
  }
  if (v.transB && v.vecB) {
    // Four vec4 columns of op(B) (rows of B along k), transposed into rows.
    return `  var t: array<vec4<f32>, 4>;
  for (var c = 0u; c < 4u; c++) {
    if (${v.full ? 'true' : 'n + c < params.N && k < params.K'}) {
      t[c] = ${bVec4(v, 'b_off + (n + c) * params.K + k')};
    }
  }
${TRANSPOSE4}`;
  }
  const at = v.transB ? 'b_off + (n + c) * params.K + k + i' : 'b_off + (k + i) * params.N + n + c';
  return `  var rows: array<vec4<f32>, 4>;
  for (var i = 0u; i < 4u; i++) {
    for (var c = 0u; c < 4u; c++) {
      if (k + i < params.K && n + c < params.N) {
        rows[i][c] = ${bAt(v, at)};
      }
    }
  }
  return rows;`;
}

/** The uniform record of both kernels: sizes, then up to 4 broadcast batch dims and A's and B's strides. */
const UNIFORMS = {
  M: 'u32',
  N: 'u32',
  K: 'u32',
  batch: 'vec4<u32>',
  a_stride: 'vec4<u32>',
  b_stride: 'vec4<u32>',
} as const;

/** The tiled kernel's body for a configuration and variant: plain loaders, or prefetching ones. */
function tiledBody(cfg: TileConfig, v: Variant): string {
  const [a, b] = [loaderA(v), loaderB(v)];
  const [pa, pb] = [prefetch(a, 'a_regs'), prefetch(b, 'b_regs')];
  return fillTemplate('matmul.wgsl', matmulSrc, {
    RM: cfg.rm,
    RN: cfg.rn,
    TK: cfg.tk,
    SPREAD: cfg.spread ?? false,
    PREFETCH: cfg.prefetch ?? false,
    LOAD_A: tileLoop(a),
    LOAD_B: tileLoop(b),
    REGS: cfg.prefetch ? `${pa.decl}\n${pb.decl}` : '',
    FETCH_A: cfg.prefetch ? pa.fetch : '',
    FETCH_B: cfg.prefetch ? pb.fetch : '',
    PUT_A: cfg.prefetch ? pa.put : '',
    PUT_B: cfg.prefetch ? pb.put : '',
    STORE: store(v),
  });
}

/** The program of one configuration and variant (transposes, vec4 operands, bounds checks). */
export function matmulProgram(cfg: TileConfig, v: Variant): Program {
  const flags = `${+v.transA}${+v.transB}${+v.vecA}${+v.vecB}${+v.vecC}${+v.full}${v.halfB ? `:${v.halfB}` : ''}`;
  const shape = `${cfg.wx}x${cfg.wy}x${cfg.rm}x${cfg.rn}x${cfg.tk}${cfg.spread ? 's' : ''}${cfg.prefetch ? 'p' : ''}`;
  return cachedProgram(`matmul:${cfg.kind}:${shape}:${flags}`, () => ({
    name: 'matmul',
    inputs: { A: v.vecA ? 'vec4<f32>' : 'f32', B: v.halfB ? halfBinding(v.halfB) : v.vecB ? 'vec4<f32>' : 'f32' },
    outputs: { C: v.vecC ? 'vec4<f32>' : 'f32' },
    uniforms: UNIFORMS,
    workgroupSize: [cfg.wx, cfg.wy, 1],
    body:
      (v.halfB ? halfReaders(v.halfB, 'B') : '') +
      (cfg.kind === 'direct'
        ? fillTemplate('matmul_direct.wgsl', directSrc, {
            RM: cfg.rm,
            RN: cfg.rn,
            LOAD_A: directLoadA(v),
            LOAD_B: directLoadB(v),
            STORE: store(v),
          })
        : tiledBody(cfg, v)),
  }));
}

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

function variantOf(cfg: TileConfig, c: MatmulCase): Variant {
  const { m, n, k } = c;
  return {
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

/** The launch of one configuration on a case: its program and call (one output, C). */
function matmulLaunch(
  cfg: TileConfig,
  c: MatmulCase,
  a: KernelTensor | GPUBuffer,
  b: KernelTensor | GPUBuffer,
): { program: Program; call: LaunchCall<readonly [number]> } {
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
  return {
    program: matmulProgram(cfg, variantOf(cfg, c)),
    call: {
      inputs: [a, b],
      outputs: [m * n * batch * 4],
      // A thread per RM x RN block: ceil(n / (WG_X RN)) x ceil(m / (WG_Y RM)) workgroups per batch entry.
      grid: { threads: [Math.ceil(n / cfg.rn), Math.ceil(m / cfg.rm), batch] },
      uniforms: {
        M: m,
        N: n,
        K: k,
        batch: [...Array<number>(pad).fill(1), ...bc.shape],
        a_stride: [...Array<number>(pad).fill(0), ...bc.strides[0]!],
        b_stride: [...Array<number>(pad).fill(0), ...bc.strides[1]!],
      },
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
  const candidates = [fallback, ...family.filter((cfg) => cfg !== fallback && fits(cfg, limits))];
  const v = variantOf(fallback, c);
  const flags = `${+v.transA}${+v.transB}${+v.vecA}${+v.vecB}${+v.vecC}${v.halfB ?? ''}`;
  const name = rt.tuner.pick({
    kernel: 'matmul',
    shapeClass: `${fallback.kind}:${flags}:m${log2Class(m)}:n${log2Class(n)}:k${log2Class(k)}:b${log2Class(batch)}`,
    candidates: candidates.map((cfg) => cfg.name),
    trial: () => {
      const byName = (chosen: string): TileConfig => candidates.find((cfg) => cfg.name === chosen)!;
      const trialOf = (t: MatmulCase) => {
        const av = scratchValues(sizeOf(t.aBatch) * t.m * t.k, 1);
        const bv = scratchValues(sizeOf(t.bBatch) * t.k * t.n, 2);
        // A half B: the top halves of the f32 words (bf16 by truncation; read as f16, |x| < 1 stays finite).
        return launchTrial(
          rt,
          [av, t.halfB ? packWords(bv) : bv],
          (chosen, [a, b]) => matmulLaunch(byName(chosen), t, a!, b!),
          // Every configuration sums the K products in the same order with FMAs; allow an f32 rounding a term.
          agreeWithin(1e-6 * k, 1e-6),
        );
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
  checkInputs(matmulProgram(override ?? fallback, variantOf(override ?? fallback, c)), 'matmul', [a, b]);
  if (m * n * batch === 0) return rt.alloc(0);
  if (k === 0) return fillInto(rt, m * n * batch * 4, m * n * batch, 'f32', 0);
  if (batch > rt.maxWorkgroupsPerDim)
    throw new BackendError('webgpu', `matmul: batch ${batch} exceeds ${rt.maxWorkgroupsPerDim} workgroups`);
  const { program, call } = matmulLaunch(configFor(rt, c), c, a, b);
  const [out] = launch(rt, program, call);
  return out;
}

registerKernels<GpuBackend>('webgpu', {
  matmul: (b, x, y, transA, transB, outShape) => asStorage(matmul(b.runtime, x, y, transA, transB, outShape)),
});
