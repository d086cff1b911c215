import { ArgumentError } from '../../core/errors.js';
import { NoAdapterError } from './errors.js';

/**
 * WebGPU device acquisition in Node through Dawn (npm `webgpu`). Paths are tried in order:
 *  - `native`: the platform's own backend (Vulkan on Linux, Metal on macOS, D3D12 on Windows): `create([])`;
 *  - `opengles`: Mesa's llvmpipe through OpenGL ES on a Linux machine without a GPU
 *    (`EGL_PLATFORM=surfaceless`, `backend=opengles`, `featureLevel: 'compatibility'`).
 * If none gives an adapter, a typed `NoAdapterError` says what to install. The device is requested with the
 * adapter's real limits: the defaults (128 invocations per workgroup in compatibility mode) are too small.
 */
export type AdapterPath = 'native' | 'opengles';

export interface AcquireOptions {
  /**
   * Paths to try, in order. Default: the environment variable RLVR_WEBGPU_PATHS (comma-separated, `none` for
   * no path at all, which makes acquisition fail as on a machine without an adapter), else native, then opengles.
   */
  readonly paths?: readonly AdapterPath[];
  readonly powerPreference?: GPUPowerPreference;
}

export interface AdapterDescription {
  readonly path: AdapterPath;
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  /** One line for logs and benchmark reports. */
  readonly summary: string;
}

export interface AcquiredDevice {
  /**
   * The Dawn instance and adapter the device came from. Whoever holds the device must hold these too: if the
   * instance is garbage-collected while its device lives, Dawn aborts the process.
   */
  readonly gpu: GPU;
  readonly gpuAdapter: GPUAdapter;
  readonly device: GPUDevice;
  readonly adapter: AdapterDescription;
  /** Dawn's `globals` (GPUBufferUsage, GPUMapMode, ...), which Node does not define globally. */
  readonly globals: DawnGlobals;
}

export interface DawnGlobals {
  readonly GPUBufferUsage: { readonly [k in 'MAP_READ' | 'COPY_SRC' | 'COPY_DST' | 'STORAGE' | 'UNIFORM']: number };
  readonly GPUMapMode: { readonly READ: number };
  readonly [name: string]: unknown;
}

interface DawnModule {
  create(options: string[]): GPU;
  globals: object;
}

/** Limits requested at the adapter's value (when it reports them). */
const LIMITS = [
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupsPerDimension',
  'maxComputeWorkgroupStorageSize',
  'maxStorageBufferBindingSize',
  'maxBufferSize',
  'maxStorageBuffersPerShaderStage',
  'maxUniformBufferBindingSize',
  'maxUniformBuffersPerShaderStage',
  'maxBindingsPerBindGroup',
] as const;

let dawn: Promise<DawnModule> | null = null;

/**
 * One Dawn instance per path for the whole process, never released: Dawn aborts the process if an instance is
 * garbage-collected while a device from it lives, and tearing instances down while others run raced inside
 * Mesa (pthread assertions). Each backend still gets its own adapter and device, destroyed on dispose.
 */
const instances = new Map<AdapterPath, GPU>();

/** Load Dawn once, after setting what its EGL (llvmpipe) path reads at load time. */
function loadDawn(): Promise<DawnModule> {
  if (process.env.EGL_PLATFORM === undefined) process.env.EGL_PLATFORM = 'surfaceless';
  dawn ??= import('webgpu') as Promise<DawnModule>;
  return dawn;
}

async function tryPath(mod: DawnModule, path: AdapterPath, opts: AcquireOptions): Promise<[GPU, GPUAdapter | null]> {
  let gpu = instances.get(path);
  if (!gpu) {
    gpu = mod.create(path === 'native' ? [] : ['backend=opengles']);
    instances.set(path, gpu);
  }
  const request: GPURequestAdapterOptions = path === 'native' ? {} : { featureLevel: 'compatibility' };
  if (opts.powerPreference) request.powerPreference = opts.powerPreference;
  return [gpu, await gpu.requestAdapter(request)];
}

function describe(path: AdapterPath, info: GPUAdapterInfo): AdapterDescription {
  const vendor = info.vendor ?? '';
  const architecture = info.architecture ?? '';
  const device = info.device ?? '';
  const description = info.description ?? '';
  const summary = `${path}: ${[vendor, architecture, device, description].filter((s) => s !== '').join(' / ') || 'unknown adapter'}`;
  return { path, vendor, architecture, device, description, summary };
}

function pathsFromEnv(): readonly AdapterPath[] | null {
  const v = process.env.RLVR_WEBGPU_PATHS;
  if (v === undefined || v.trim() === '') return null;
  if (v.trim() === 'none') return [];
  const paths = v.split(',').map((p) => p.trim());
  for (const p of paths) {
    if (p !== 'native' && p !== 'opengles') throw new ArgumentError('createWebGpuBackend', `RLVR_WEBGPU_PATHS: unknown path "${p}" (use native, opengles or none)`);
  }
  return paths as AdapterPath[];
}

export async function acquireDevice(opts: AcquireOptions = {}): Promise<AcquiredDevice> {
  const paths = opts.paths ?? pathsFromEnv() ?? (['native', 'opengles'] as const);
  const tried: string[] = [];
  let mod: DawnModule;
  try {
    mod = await loadDawn();
  } catch (e) {
    throw new NoAdapterError([`loading the npm package "webgpu" (${e instanceof Error ? e.message : String(e)})`]);
  }
  for (const path of paths) {
    let gpu: GPU;
    let adapter: GPUAdapter | null = null;
    try {
      [gpu, adapter] = await tryPath(mod, path, opts);
    } catch (e) {
      tried.push(`${path} (${e instanceof Error ? e.message : String(e)})`);
      continue;
    }
    if (!adapter) {
      tried.push(path === 'native' ? 'native (Vulkan/Metal/D3D12): no adapter' : 'opengles (Mesa llvmpipe via EGL): no adapter');
      continue;
    }
    const requiredLimits: Record<string, number> = {};
    const limits = adapter.limits as unknown as Record<string, number | undefined>;
    for (const name of LIMITS) {
      const v = limits[name];
      if (typeof v === 'number') requiredLimits[name] = v;
    }
    // Per-kernel GPU times (RLVR_PROFILE=1) need timestamp queries; requested whenever the adapter offers them.
    const requiredFeatures = (['timestamp-query'] as const).filter((f) => adapter.features.has(f));
    const device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: 'rlvr-webgpu' });
    return { gpu, gpuAdapter: adapter, device, adapter: describe(path, adapter.info), globals: mod.globals as DawnGlobals };
  }
  throw new NoAdapterError(tried.length > 0 ? tried : ['no path (RLVR_WEBGPU_PATHS=none)']);
}
