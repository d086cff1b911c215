import matmulSrc from '../../../../shaders/matmul.wgsl';
import directSrc from '../../../../shaders/matmul_direct.wgsl';
import { cachedProgram, type Program } from '../program.js';
import { fillTemplate } from '../wgsl.js';
import type { HalfDType } from '../../../core/dtype.js';
import { halfBinding, halfReaders } from './half.js';
import type { TileConfig } from './matmul-configs.js';

/**
 * The program record of the matmul kernels and the WGSL it fills in: one pipeline per configuration
 * (matmul-configs.ts) and variant: the transposes, which operands are read as vec4 (their contiguous dimension a
 * multiple of 4), whether B is half storage, and whether bounds checks are needed (compiled out when M, N, K
 * divide the tile or block). The tiled kernel (shaders/matmul.wgsl) gets its tile loaders, plain or prefetching;
 * the direct one (shaders/matmul_direct.wgsl) its register loaders; both the same store.
 */
export interface Variant {
  readonly transA: boolean;
  readonly transB: boolean;
  readonly vecA: boolean;
  readonly vecB: boolean;
  readonly vecC: boolean;
  readonly full: boolean;
  /** B is a frozen bf16/f16 weight, two elements per u32 word, widened as each load reads it (null: f32). */
  readonly halfB: HalfDType | null;
  /** C = D + A B: the store adds an addend D of C's layout (a gathered cotangent, folded in). */
  readonly addend: boolean;
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
      load: guard(v.full, 'gm < params.M && gk < k_end', 'val = A[(a_off + gm * params.K + gk) / 4u];'),
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
      load: guard(v.full, 'gm < params.M && gk < k_end', 'val = A[a_off + gm * params.K + gk];'),
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
      load: guard(v.full, 'gm < params.M && gk < k_end', 'val = A[(a_off + gk * params.M + gm) / 4u];'),
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
    load: guard(v.full, 'gm < params.M && gk < k_end', 'val = A[a_off + gk * params.M + gm];'),
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
      load: guard(v.full, 'gk < k_end && gn < params.N', `val = ${bVec4(v, 'b_off + gk * params.N + gn')};`),
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
      load: guard(v.full, 'gk < k_end && gn < params.N', `val = ${bAt(v, 'b_off + gk * params.N + gn')};`),
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
      load: guard(v.full, 'gk < k_end && gn < params.N', `val = ${bVec4(v, 'b_off + gn * params.K + gk')};`),
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
    load: guard(v.full, 'gk < k_end && gn < params.N', `val = ${bAt(v, 'b_off + gn * params.K + gk')};`),
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
    const at = '(c_off + m * params.N + n) / 4u';
    const body = `C[${at}] = v${v.addend ? ` + D[${at}]` : ''};`;
    return v.full ? `${ind}${body}` : `${ind}if (m < params.M && n < params.N) {\n${ind}  ${body}\n${ind}}`;
  }
  const at = 'c_off + m * params.N + n + c';
  return `${ind}for (var c = 0u; c < 4u; c++) {
${ind}  if (m < params.M && n + c < params.N) {
${ind}    C[${at}] = v[c]${v.addend ? ` + D[${at}]` : ''};
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

/** Split-K's extra uniforms: the number of K chunks and their length (a multiple of the K tile). */
const SPLIT_UNIFORMS = { ...UNIFORMS, splits: 'u32', k_chunk: 'u32' } as const;

/** The K range of a workgroup: all of K, or the chunk wg.z selects beside its batch entry (split-K). */
const splitK = (cfg: TileConfig): string =>
  cfg.splitK
    ? `  let split = rem % params.splits;
  rem = rem / params.splits;
  let k_lo = split * params.k_chunk;
  let k_hi = min(params.K, k_lo + params.k_chunk);
  k_end = k_hi;`
    : `  let k_lo = 0u;
  let k_hi = params.K;
  k_end = k_hi;`;

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
    SPLIT_K: splitK(cfg),
  });
}

/** The program of one configuration and variant (transposes, vec4 operands, bounds checks). */
export function matmulProgram(cfg: TileConfig, v: Variant): Program {
  const flags =
    `${+v.transA}${+v.transB}${+v.vecA}${+v.vecB}${+v.vecC}${+v.full}${v.halfB ? `:${v.halfB}` : ''}` +
    (v.addend ? ':d' : '');
  const shape =
    `${cfg.wx}x${cfg.wy}x${cfg.rm}x${cfg.rn}x${cfg.tk}${cfg.spread ? 's' : ''}${cfg.prefetch ? 'p' : ''}` +
    (cfg.splitK ? 'k' : '');
  return cachedProgram(`matmul:${cfg.kind}:${shape}:${flags}`, () => ({
    name: 'matmul',
    inputs: {
      A: v.vecA ? 'vec4<f32>' : 'f32',
      B: v.halfB ? halfBinding(v.halfB) : v.vecB ? 'vec4<f32>' : 'f32',
      ...(v.addend ? { D: v.vecC ? ('vec4<f32>' as const) : ('f32' as const) } : {}),
    },
    outputs: { C: v.vecC ? 'vec4<f32>' : 'f32' },
    uniforms: cfg.splitK ? SPLIT_UNIFORMS : UNIFORMS,
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
