import { halfReader, roundToHalf } from '../../src/core/half.js';
import type { DawnGlobals } from '../../src/backends/webgpu/device.js';
import { CheckError, type Task } from './gpu-task.js';
import { scratchValues } from '../../src/backends/webgpu/kernels/tune.js';

/**
 * Half precision on the matrix units (issue 36): a matmul on Dawn's experimental subgroup matrices
 * (`chromium-experimental-subgroup-matrix`, Vulkan's cooperative matrices: NVIDIA's tensor cores), f16 operands
 * with f32 accumulation where the device has `shader-f16`, f32 operands where it lists such a configuration.
 * The feature is exposed only with Dawn's `allow_unsafe_apis` (and f16 on NVIDIA drivers below 615.71 only with
 * `vulkan_enable_f16_on_nvidia`), so this file makes its own device with both, apart from the backend's.
 *
 * Each candidate: one subgroup computes TM x TN tiles of the configuration's M x N, loading its operands straight
 * from storage (the L1 cache shares them between the workgroups of an SM) or, `staged`, through workgroup memory
 * shared by its workgroup's subgroups (`sgN`: N of them, by `subgroup_id`). Where bench:gpu compares Dawn's fast
 * toggles, every candidate also runs on a second device without robustness (no bounds clamp on any load). A
 * candidate's product is checked on sampled entries against an f64 sum of the same f16 values before its time
 * counts (a dropped tile is off by a whole entry).
 *
 * Not on llvmpipe (no subgroup matrices): there it returns the reason and no task. The WGSL has only ever been
 * compiled on the device that runs it: a compile error is printed, not thrown.
 */

export interface MatrixConfig {
  readonly componentType: string;
  readonly resultComponentType: string;
  readonly M: number;
  readonly N: number;
  readonly K: number;
}

export interface MatrixCandidate {
  /** Tiles per subgroup along M and N. */
  readonly tm: number;
  readonly tn: number;
  /** Subgroups per workgroup along M and N (each its own TM x TN tiles). */
  readonly sy: number;
  readonly sx: number;
  /**
   * `unrolled`: one named accumulator per tile and no loops over tiles, operands straight from storage, `kt`
   * configuration K steps of loads issued before their products (an H200's first run had the accumulators in an
   * indexed array, which was slower the larger the tile: 37 TFLOP/s at best, as if the array lived in memory).
   * `staged`: the workgroup's A and B tiles copied through workgroup memory, `kt` K steps deep, so its subgroups
   * share each load.
   */
  readonly form: 'unrolled' | 'staged';
  readonly kt?: number;
}

/** The candidates (the H200 of 2026-11-28 ran the first six: 4x4 unrolled at 16x16x16 the fastest, 70.7 TFLOP/s). */
export const MATRIX_CANDIDATES: readonly MatrixCandidate[] = [
  { tm: 2, tn: 2, sy: 1, sx: 1, form: 'unrolled' },
  { tm: 2, tn: 4, sy: 1, sx: 1, form: 'unrolled' },
  { tm: 4, tn: 4, sy: 1, sx: 1, form: 'unrolled' },
  { tm: 2, tn: 2, sy: 2, sx: 2, form: 'staged', kt: 2 },
  { tm: 4, tn: 4, sy: 2, sx: 2, form: 'staged', kt: 1 },
  { tm: 4, tn: 2, sy: 2, sx: 4, form: 'staged', kt: 1 },
  { tm: 4, tn: 4, sy: 1, sx: 1, form: 'unrolled', kt: 2 },
  { tm: 4, tn: 8, sy: 1, sx: 1, form: 'unrolled' },
  { tm: 4, tn: 4, sy: 2, sx: 1, form: 'unrolled' },
  { tm: 4, tn: 2, sy: 2, sx: 4, form: 'staged', kt: 2 },
];

export const candidateName = (c: MatrixCandidate): string =>
  `${c.tm}x${c.tn}${c.sy * c.sx > 1 ? ` sg${c.sy * c.sx}` : ''} ${c.form}${c.kt ? ` kt${c.kt}` : ''}`;

/** Bytes of workgroup memory a staged candidate's tiles take (the device's default limit is 16 KiB). */
export function stagedBytes(cfg: MatrixConfig, c: MatrixCandidate): number {
  if (c.form !== 'staged') return 0;
  const { rows, cols } = blockOf(cfg, c);
  const bk = (c.kt ?? 1) * cfg.K;
  return (rows * bk + bk * cols) * (cfg.componentType === 'f16' ? 2 : 4);
}

/** Rows and columns of C one workgroup computes. */
export const blockOf = (cfg: MatrixConfig, c: MatrixCandidate): { rows: number; cols: number } => ({
  rows: c.sy * c.tm * cfg.M,
  cols: c.sx * c.tn * cfg.N,
});

/**
 * What every form declares: the extensions, the bindings (A and B as vec4s where a staged form copies them into
 * workgroup memory) and the configuration's matrix types, which are <T, columns, rows>: left M x K, right K x N,
 * result M x N.
 */
function header(cfg: MatrixConfig, vec4Operands: boolean): string {
  const t = cfg.componentType;
  const r = cfg.resultComponentType;
  const operand = vec4Operands ? `vec4<${t}>` : t;
  const [a, b] = vec4Operands ? ['A4', 'B4'] : ['A', 'B'];
  return `${t === 'f16' || r === 'f16' ? 'enable f16;\n' : ''}enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

struct Params { M: u32, N: u32, K: u32 }
@group(0) @binding(0) var<storage, read> ${a}: array<${operand}>;
@group(0) @binding(1) var<storage, read> ${b}: array<${operand}>;
@group(0) @binding(2) var<storage, read_write> C: array<${r}>;
@group(0) @binding(3) var<uniform> params: Params;

alias Left = subgroup_matrix_left<${t}, ${cfg.K}, ${cfg.M}>;
alias Right = subgroup_matrix_right<${t}, ${cfg.N}, ${cfg.K}>;
alias Acc = subgroup_matrix_result<${r}, ${cfg.N}, ${cfg.M}>;
`;
}

/**
 * The kernel: C (M x N, f32, row-major) = A (M x K, row-major) B (K x N, row-major), operands of the
 * configuration's component type. `subgroupSize` is the adapter's largest (the workgroup's x size must be a
 * multiple of it, and each subgroup then holds all of it).
 */
export function matrixShader(cfg: MatrixConfig, c: MatrixCandidate, subgroupSize: number): string {
  const t = cfg.componentType;
  const subgroups = c.sy * c.sx;
  const threads = subgroups * subgroupSize;
  const staged = c.form === 'staged';
  const { rows: bm, cols: bn } = blockOf(cfg, c);
  const kt = c.kt ?? 1;
  const bk = kt * cfg.K;
  const is = Array.from({ length: c.tm }, (_, i) => i);
  const js = Array.from({ length: c.tn }, (_, j) => j);
  const each = (f: (i: number, j: number) => string): string => is.flatMap((i) => js.map((j) => f(i, j))).join('\n');
  const lines: string[] = [];
  // K steps of the configuration: the subgroup's A and B tiles of every step (names suffixed by the step), then
  // their products, so that a step's loads are in flight while the previous step multiplies.
  const steps = (
    kks: readonly number[],
    aPtr: string,
    aOff: (i: number, kk: number) => string,
    aStride: string,
    bPtr: string,
    bOff: (j: number, kk: number) => string,
    bStride: string,
  ) => [
    ...kks.flatMap((kk) => [
      ...is.map((i) => `    let a${i}k${kk} = subgroupMatrixLoad<Left>(${aPtr}, ${aOff(i, kk)}, false, ${aStride});`),
      ...js.map((j) => `    let b${j}k${kk} = subgroupMatrixLoad<Right>(${bPtr}, ${bOff(j, kk)}, false, ${bStride});`),
    ]),
    ...kks.flatMap((kk) =>
      js.flatMap((j) =>
        is.map((i) => `    acc${i}_${j} = subgroupMatrixMultiplyAccumulate(a${i}k${kk}, b${j}k${kk}, acc${i}_${j});`),
      ),
    ),
  ];
  const kks = Array.from({ length: kt }, (_, kk) => kk);
  if (staged) {
    lines.push(
      '  for (var k0 = 0u; k0 < params.K; k0 += BK) {',
      '    workgroupBarrier();',
      // vec4 copies: BK and BN are multiples of 4, so a vec4 never crosses a row of the tile.
      '    for (var e = lid; e < BM * BK / 4u; e += THREADS) {',
      '      let v = A4[((brow + (4u * e) / BK) * params.K + k0 + (4u * e) % BK) / 4u];',
      '      As[4u * e] = v.x; As[4u * e + 1u] = v.y; As[4u * e + 2u] = v.z; As[4u * e + 3u] = v.w;',
      '    }',
      '    for (var e = lid; e < BK * BN / 4u; e += THREADS) {',
      '      let v = B4[((k0 + (4u * e) / BN) * params.N + bcol + (4u * e) % BN) / 4u];',
      '      Bs[4u * e] = v.x; Bs[4u * e + 1u] = v.y; Bs[4u * e + 2u] = v.z; Bs[4u * e + 3u] = v.w;',
      '    }',
      '    workgroupBarrier();',
    );
    lines.push(
      ...steps(
        kks,
        '&As',
        (i, kk) => `(sy * ${c.tm * cfg.M}u + ${i * cfg.M}u) * BK + ${kk * cfg.K}u`,
        'BK',
        '&Bs',
        (j, kk) => `${kk * cfg.K}u * BN + sx * ${c.tn * cfg.N}u + ${j * cfg.N}u`,
        'BN',
      ),
      '  }',
    );
  } else {
    lines.push(
      `  for (var k = 0u; k < params.K; k += ${bk}u) {`,
      ...steps(
        kks,
        '&A',
        (i, kk) => `(row0 + ${i * cfg.M}u) * params.K + k + ${kk * cfg.K}u`,
        'params.K',
        '&B',
        (j, kk) => `(k + ${kk * cfg.K}u) * params.N + col0 + ${j * cfg.N}u`,
        'params.N',
      ),
      '  }',
    );
  }
  return `${header(cfg, staged)}${
    staged
      ? `const BM = ${bm}u;
const BN = ${bn}u;
const BK = ${bk}u;
const THREADS = ${threads}u;
var<workgroup> As: array<${t}, ${bm * bk}>;
var<workgroup> Bs: array<${t}, ${bk * bn}>;
`
      : ''
  }
@compute @workgroup_size(${threads})
fn main(@builtin(workgroup_id) wg: vec3<u32>${staged ? ', @builtin(local_invocation_index) lid: u32' : ''}${subgroups > 1 ? ', @builtin(subgroup_id) sg: u32' : ''}) {
${subgroups > 1 ? `  let sy = sg / ${c.sx}u;\n  let sx = sg % ${c.sx}u;` : '  let sy = 0u;\n  let sx = 0u;'}
  let brow = wg.y * ${bm}u;
  let bcol = wg.x * ${bn}u;
  let row0 = brow + sy * ${c.tm * cfg.M}u;
  let col0 = bcol + sx * ${c.tn * cfg.N}u;
${each((i, j) => `  var acc${i}_${j} = Acc();`)}
${lines.join('\n')}
${each((i, j) => `  subgroupMatrixStore(&C, (row0 + ${i * cfg.M}u) * params.N + col0 + ${j * cfg.N}u, acc${i}_${j}, false, params.N);`)}
}
`;
}

/**
 * Whether sampled entries of C agree with f64 sums of the operands' values: within the f32 accumulation's
 * worst-case rounding (K roundings of at most 2^-24 of the running sum of |a b|), which a dropped or misplaced
 * tile exceeds by orders of magnitude. The first disagreement, or null.
 */
export function checkSampled(
  a: Float32Array,
  b: Float32Array,
  c: Float32Array,
  n: number,
  samples: readonly (readonly [number, number])[],
): string | null {
  for (const [i, j] of samples) {
    let sum = 0;
    let abs = 0;
    for (let k = 0; k < n; k++) {
      const p = a[i * n + k]! * b[k * n + j]!;
      sum += p;
      abs += Math.abs(p);
    }
    const got = c[i * n + j]!;
    const tol = n * 2 ** -24 * abs + 1e-30;
    if (!(Math.abs(got - sum) <= tol)) return `C[${i}, ${j}] = ${got}, want ${sum} (tolerance ${tol.toExponential(2)})`;
  }
  return null;
}

/** npm `webgpu`: Node has no GPUBufferUsage or GPUMapMode global; the module's `globals` has them. */
interface DawnModule {
  create(options: string[]): GPU;
  globals: DawnGlobals;
}
/** Dawn aborts the process if an instance is collected while a device from it lives: kept for the process. */
const instances: GPU[] = [];

interface Probe {
  readonly lines: string[];
  readonly tasks: Task[];
}

/**
 * The subgroup-matrix matmul tasks at n x n x n (n a multiple of every candidate's block): one per configuration
 * and candidate that compiles, each checked before its first time counts.
 */
export async function subgroupMatrixTasks(n: number, robustness: readonly boolean[] = [true]): Promise<Probe> {
  const lines: string[] = [];
  let dawn: DawnModule;
  try {
    dawn = (await import('webgpu')) as DawnModule;
  } catch (e) {
    return { lines: [`subgroup matrix: npm "webgpu" did not load (${String(e)})`], tasks: [] };
  }
  const USAGE = dawn.globals.GPUBufferUsage;
  /** An adapter with the features, robustness (Dawn's bounds clamps on every storage access) on or off. */
  const adapterWith = async (robust: boolean): Promise<GPUAdapter | null> => {
    const gpu = dawn.create([
      // Dawn's own subgroup-matrix tests run Vulkan with its memory model, which cooperative matrices require.
      `enable-dawn-features=allow_unsafe_apis,vulkan_enable_f16_on_nvidia,use_vulkan_memory_model${robust ? '' : ',disable_robustness'}`,
      'disable-dawn-features=timestamp_quantization',
    ]);
    instances.push(gpu);
    return gpu.requestAdapter();
  };
  const adapter = await adapterWith(true);
  const feature = 'chromium-experimental-subgroup-matrix' as GPUFeatureName;
  if (!adapter?.features.has(feature)) {
    return {
      lines: [
        `subgroup matrix: not exposed (${adapter ? 'the native adapter lacks the feature' : 'no native adapter'})`,
      ],
      tasks: [],
    };
  }
  const info = adapter.info as GPUAdapterInfo & {
    subgroupMatrixConfigs?: readonly MatrixConfig[];
    subgroupMaxSize?: number;
  };
  const f16 = adapter.features.has('shader-f16');
  const subgroupSize = info.subgroupMaxSize ?? 32;
  const all = [...(info.subgroupMatrixConfigs ?? [])].map((x) => ({
    componentType: x.componentType,
    resultComponentType: x.resultComponentType,
    M: x.M,
    N: x.N,
    K: x.K,
  }));
  lines.push(
    `subgroup matrix: exposed; subgroup size ${info.subgroupMinSize ?? '?'}-${subgroupSize}; shader-f16 ${f16 ? 'yes' : 'no'}; ` +
      `configurations: ${all.map((x) => `${x.componentType}->${x.resultComponentType} ${x.M}x${x.N}x${x.K}`).join(', ') || 'none listed'}`,
  );
  const usable = all.filter(
    (x) =>
      x.resultComponentType === 'f32' &&
      (x.componentType === 'f32' || (x.componentType === 'f16' && f16)) &&
      n % x.K === 0,
  );
  if (usable.length === 0)
    return { lines: [...lines, 'subgroup matrix: no f16->f32 or f32->f32 configuration'], tasks: [] };
  const features: GPUFeatureName[] = ['subgroups' as GPUFeatureName, feature];
  if (f16) features.push('shader-f16');
  // Operands in [-1, 1), rounded to the component type (f16 words, or f32), made once and uploaded to each device;
  // the check widens the same words.
  // (The tuner's scratch sequence, in [-0.5, 0.5), doubled: exact in f32.)
  const values = (seed: number): Float32Array => scratchValues(n * n, seed).map((x) => 2 * x);
  type HostOperand = { readonly data: Float32Array | Uint16Array; readonly widened: Float32Array };
  const hostOperands = new Map<string, [HostOperand, HostOperand]>();
  const hostOperandsOf = (type: string): [HostOperand, HostOperand] => {
    let o = hostOperands.get(type);
    if (o) return o;
    const one = (seed: number): HostOperand => {
      const v = values(seed);
      const data = type === 'f16' ? roundToHalf('f16', v) : v;
      // The values the device multiplies, for the check: the f16 words widened back.
      return { data, widened: data instanceof Uint16Array ? Float32Array.from(data, halfReader('f16')) : v };
    };
    o = [one(1), one(2)];
    hostOperands.set(type, o);
    return o;
  };
  const samples: [number, number][] = Array.from({ length: 256 }, (_, i) => [
    (i * 2654435761) % n,
    (i * 40503 + 7) % n,
  ]);
  const flops = 2 * n ** 3;
  // Every buffer padded by 64 rows: a bounds check of a load may count whole rows of its stride past the last.
  const padded = (elements: number): number => elements + 64 * n;
  const tasks: Task[] = [];
  let peerAsked = false;
  for (const robust of robustness) {
    const on = robust ? adapter : await adapterWith(false);
    let device: GPUDevice;
    try {
      if (!on) throw new Error('no adapter without robustness');
      device = await on.requestDevice({
        requiredFeatures: features,
        requiredLimits: {
          maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
          maxBufferSize: adapter.limits.maxBufferSize,
        },
      });
    } catch (e) {
      lines.push(`subgroup matrix${robust ? '' : ' (no robustness)'}: requestDevice failed (${String(e)})`);
      continue;
    }
    const operands = new Map<string, { a: GPUBuffer; b: GPUBuffer; av: Float32Array; bv: Float32Array }>();
    const operandsOf = (type: string) => {
      let o = operands.get(type);
      if (o) return o;
      const upload = ({ data }: HostOperand): GPUBuffer => {
        const buf = device.createBuffer({
          size: data.BYTES_PER_ELEMENT * padded(data.length),
          usage: USAGE.STORAGE | USAGE.COPY_DST,
        });
        device.queue.writeBuffer(buf, 0, data);
        return buf;
      };
      const [ha, hb] = hostOperandsOf(type);
      const [a, b, av, bv] = [upload(ha), upload(hb), ha.widened, hb.widened];
      o = { a, b, av, bv };
      operands.set(type, o);
      return o;
    };
    const c = device.createBuffer({ size: 4 * padded(n * n), usage: USAGE.STORAGE | USAGE.COPY_SRC });
    const readC = device.createBuffer({ size: 4 * n * n, usage: USAGE.MAP_READ | USAGE.COPY_DST });
    const params = device.createBuffer({ size: 16, usage: USAGE.UNIFORM | USAGE.COPY_DST });
    device.queue.writeBuffer(params, 0, new Uint32Array([n, n, n, 0]));
    for (const cfg of usable) {
      for (const cand of MATRIX_CANDIDATES) {
        const { rows, cols } = blockOf(cfg, cand);
        if (n % rows !== 0 || n % cols !== 0) continue;
        if (stagedBytes(cfg, cand) > device.limits.maxComputeWorkgroupStorageSize) continue;
        if (cfg.K !== 16) continue; // 16x8x8 was the slowest configuration for every candidate on an H200
        const label = `matmul ${n}^3 ${cfg.componentType} subgroup-matrix ${cfg.M}x${cfg.N}x${cfg.K} ${candidateName(cand)}${robust ? '' : ' [no robustness]'}`;
        const code = matrixShader(cfg, cand, subgroupSize);
        device.pushErrorScope('validation');
        const module = device.createShaderModule({ code });
        const compiled = await module.getCompilationInfo();
        const errors = compiled.messages.filter((m) => m.type === 'error');
        let pipeline: GPUComputePipeline | null = null;
        try {
          if (errors.length === 0)
            pipeline = await device.createComputePipelineAsync({
              layout: 'auto',
              compute: { module, entryPoint: 'main' },
            });
        } catch (e) {
          lines.push(`${label}: pipeline failed (${e instanceof Error ? e.message : String(e)})`);
        }
        const scope = await device.popErrorScope();
        if (errors.length > 0 || scope || !pipeline) {
          const why = errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ') || scope?.message || '';
          if (why) lines.push(`${label}: not compiled (${why.slice(0, 600)})`);
          continue;
        }
        const ops = operandsOf(cfg.componentType);
        const bind = device.createBindGroup({
          layout: pipeline.getBindGroupLayout(0),
          entries: [ops.a, ops.b, c, params].map((buffer, binding) => ({ binding, resource: { buffer } })),
        });
        const p = pipeline;
        const dispatch = (reps: number): void => {
          const enc = device.createCommandEncoder();
          const pass = enc.beginComputePass();
          pass.setPipeline(p);
          pass.setBindGroup(0, bind);
          for (let r = 0; r < reps; r++) pass.dispatchWorkgroups(n / cols, n / rows);
          pass.end();
          device.queue.submit([enc.finish()]);
        };
        let reps = 0;
        const task: Task = {
          name: label,
          unit: 'GFLOP/s',
          figure: (ms) => flops / ms / 1e6,
          checked: '256 sampled entries vs f64 sums of the same operands',
          counters: '',
          run: async () => {
            if (reps === 0) {
              device.pushErrorScope('validation');
              dispatch(1);
              const enc = device.createCommandEncoder();
              enc.copyBufferToBuffer(c, 0, readC, 0, 4 * n * n);
              device.queue.submit([enc.finish()]);
              await readC.mapAsync(dawn.globals.GPUMapMode.READ);
              const got = new Float32Array(readC.getMappedRange().slice(0));
              readC.unmap();
              const err = await device.popErrorScope();
              if (err) throw new CheckError(`${label}: ${err.message}`);
              const bad = checkSampled(ops.av, ops.bv, got, n, samples);
              if (bad) throw new CheckError(`${label}: ${bad}`);
              const t0 = performance.now();
              dispatch(3);
              await device.queue.onSubmittedWorkDone();
              reps = Math.max(3, Math.min(400, Math.round((3 * 150) / Math.max(0.05, performance.now() - t0))));
            }
            const t0 = performance.now();
            dispatch(reps);
            await device.queue.onSubmittedWorkDone();
            task.counters = `${reps} products a round in one pass (${n / cols} x ${n / rows} workgroups)`;
            return (performance.now() - t0) / reps;
          },
          peer: peerAsked ? null : { task: 'matmul', n, reps: 10, dtype: 'f16' },
          group: `subgroup-matrix ${n}`,
          dispose: () => {},
        };
        peerAsked = true;
        tasks.push(task);
      }
    }
  }
  return { lines, tasks };
}
