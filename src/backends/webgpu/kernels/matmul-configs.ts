/**
 * The configurations of the matmul kernels: the tiled kernel with workgroup memory (shaders/matmul.wgsl), used
 * on GPUs, and the register-blocked kernel without it (shaders/matmul_direct.wgsl), used on CPU-emulated
 * adapters such as llvmpipe, where workgroup memory is ordinary memory and staging only costs. Each family has a
 * fixed default (`defaultConfig`) and candidates the tuner may time instead per shape class (kernels/matmul.ts).
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
  /**
   * Tiled only: split-K, at most this many chunks of K, each a partial product of its own workgroups, then summed
   * in chunk order (matmul_split_sum.wgsl): more workgroups for a small output over a long K.
   */
  readonly splitK?: number;
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
    // Split-K for small outputs over a long K (weight gradients, LoRA's rank-r products: on an H200 a 512 x 512
    // gradient over 4,096 tokens ran 64 workgroups, 0.16 ms; a 1024 x 16 one 16, 0.16 ms).
    { name: 'Lsp/k4', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true, splitK: 4 },
    { name: 'Lsp/k8', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true, splitK: 8 },
    { name: 'Lsp/k16', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true, splitK: 16 },
    { name: 'Lsp/k32', kind: 'tiled', wx: 16, wy: 16, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true, splitK: 32 },
    {
      name: 'XLk16sp/k4',
      kind: 'tiled',
      wx: 16,
      wy: 16,
      rm: 8,
      rn: 8,
      tk: 16,
      spread: true,
      prefetch: true,
      splitK: 4,
    },
    // Narrow tiles for rank-r outputs (LoRA's 16 columns, or 16 rows): a 64 x 64 tile leaves 3/4 of its threads'
    // outputs outside N = 16.
    { name: 'N16/k8', kind: 'tiled', wx: 4, wy: 32, rm: 4, rn: 4, tk: 16, prefetch: true, splitK: 8 },
    { name: 'M16/k8', kind: 'tiled', wx: 32, wy: 4, rm: 4, rn: 4, tk: 16, spread: true, prefetch: true, splitK: 8 },
  ],
  direct: [
    DIRECT_LARGE,
    DIRECT_SMALL,
    { name: 'DM', kind: 'direct', wx: 8, wy: 8, rm: 4, rn: 8, tk: 4 },
    { name: 'DW', kind: 'direct', wx: 16, wy: 4, rm: 8, rn: 8, tk: 4 },
    { name: 'DT', kind: 'direct', wx: 4, wy: 16, rm: 8, rn: 4, tk: 4 },
  ],
};

/** The fixed heuristic: the default the tuner starts from, and the choice with RLVR_TUNE=off. */
export function defaultConfig(cpuLike: boolean, m: number, n: number, batch: number): TileConfig {
  // Measured on llvmpipe (bench/RESULTS.md): 8x8 outputs per thread wins at every policy shape; 4x4 only
  // wastes less on matrix-vector shapes.
  if (cpuLike) return m < 8 || n < 8 ? DIRECT_SMALL : DIRECT_LARGE;
  // Prefer the large tile unless it would leave too few workgroups to fill the device.
  const large = Math.ceil(m / 64) * Math.ceil(n / 64) * batch;
  return large >= 16 ? LARGE : SMALL;
}

/**
 * K per chunk below which split-K is not offered (the partial products' extra pass would cost more): 8 K tiles,
 * so LoRA's rank-r products over 1,024 tokens (an H200 ran each 1024 x 16 x 1024 one in 0.054 ms on 16
 * workgroups, about 4 a LoRA layer's linear) may split 4 or 8 ways.
 */
const MIN_K_CHUNK = 128;
/** Output tiles (times the batch) past which the device is already full without split-K. */
const MAX_SPLIT_TILES = 512;

/**
 * Whether the tuner offers a configuration for a case: every unsplit one; a split-K one only for a small output
 * (few tiles) over a K long enough for each of its chunks.
 */
export function offered(cfg: TileConfig, m: number, n: number, k: number, batch: number): boolean {
  if (!cfg.splitK) return true;
  const tiles = Math.ceil(m / (cfg.wy * cfg.rm)) * Math.ceil(n / (cfg.wx * cfg.rn)) * batch;
  return tiles <= MAX_SPLIT_TILES && k >= cfg.splitK * MIN_K_CHUNK;
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
