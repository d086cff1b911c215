import { ArgumentError } from '../../core/errors.js';
import { openDevice } from './adapter.js';
import type { AcquiredDevice, AcquireOptions, AdapterPath, DawnGlobals } from './device.js';
import { NoAdapterError } from './errors.js';

/**
 * Node's WebGPU: Dawn through npm `webgpu` (see device.ts for the paths). The browser build replaces this file
 * with `platform.browser.ts` (same exports), so a page bundle never contains Dawn.
 */
type DawnPath = Exclude<AdapterPath, 'navigator'>;

interface DawnModule {
  create(options: string[]): GPU;
  globals: object;
}

let dawn: Promise<DawnModule> | null = null;

/**
 * One Dawn instance per path and set of toggles for the whole process, never released: Dawn aborts the process if an instance is
 * garbage-collected while a device from it lives, and tearing instances down while others run raced inside
 * Mesa (pthread assertions). Each backend still gets its own adapter and device, destroyed on dispose.
 */
const instances = new Map<string, GPU>();

const envFlag = (name: string, on: string): boolean => process.env[name] === on;

/**
 * The Dawn toggles a device is made with. Timestamps are never quantized here (Dawn rounds them to 2^16 ns by
 * default, against timing attacks in a browser; a profiler and the step timeline need them as measured);
 * `fast` and `forceF16` as `AcquireOptions` says.
 */
export function dawnToggles(opts: AcquireOptions): { enable: string[]; disable: string[] } {
  const enable: string[] = [];
  if (opts.fast ?? envFlag('RLVR_WEBGPU_FAST', '1')) enable.push('skip_validation', 'disable_robustness');
  if (opts.forceF16 ?? envFlag('RLVR_WEBGPU_F16', 'force')) enable.push('vulkan_enable_f16_on_nvidia');
  return { enable, disable: ['timestamp_quantization'] };
}

/** Load Dawn once, after setting what its EGL (llvmpipe) path reads at load time. */
function loadDawn(): Promise<DawnModule> {
  if (process.env.EGL_PLATFORM === undefined) process.env.EGL_PLATFORM = 'surfaceless';
  dawn ??= import('webgpu') as Promise<DawnModule>;
  return dawn;
}

async function tryPath(
  mod: DawnModule,
  path: DawnPath,
  opts: AcquireOptions,
  flags: readonly string[],
): Promise<[GPU, GPUAdapter | null]> {
  const all = [...(path === 'native' ? [] : ['backend=opengles']), ...flags];
  const key = all.join(' ');
  let gpu = instances.get(key);
  if (!gpu) {
    gpu = mod.create(all);
    instances.set(key, gpu);
  }
  const request: GPURequestAdapterOptions = path === 'native' ? {} : { featureLevel: 'compatibility' };
  if (opts.powerPreference) request.powerPreference = opts.powerPreference;
  return [gpu, await gpu.requestAdapter(request)];
}

function pathsFromEnv(): readonly AdapterPath[] | null {
  const v = process.env.RLVR_WEBGPU_PATHS;
  if (v === undefined || v.trim() === '') return null;
  if (v.trim() === 'none') return [];
  const paths = v.split(',').map((p) => p.trim());
  for (const p of paths) {
    if (p !== 'native' && p !== 'opengles')
      throw new ArgumentError(
        'createWebGpuBackend',
        `RLVR_WEBGPU_PATHS: unknown path "${p}" (use native, opengles or none)`,
      );
  }
  return paths as AdapterPath[];
}

/** A device on Dawn (the paths of device.ts, in order); `NoAdapterError` when none gives one. */
export async function acquireDevice(opts: AcquireOptions = {}): Promise<AcquiredDevice> {
  const paths = opts.paths ?? pathsFromEnv() ?? (['native', 'opengles'] as const);
  const toggles = dawnToggles(opts);
  const flags = [
    ...(toggles.enable.length > 0 ? [`enable-dawn-features=${toggles.enable.join(',')}`] : []),
    `disable-dawn-features=${toggles.disable.join(',')}`,
  ];
  const tried: string[] = [];
  let mod: DawnModule;
  try {
    mod = await loadDawn();
  } catch (e) {
    throw new NoAdapterError([`loading the npm package "webgpu" (${e instanceof Error ? e.message : String(e)})`]);
  }
  for (const path of paths) {
    if (path === 'navigator') {
      tried.push('navigator (navigator.gpu exists only in a page or a worker)');
      continue;
    }
    let gpu: GPU;
    let adapter: GPUAdapter | null = null;
    try {
      [gpu, adapter] = await tryPath(mod, path, opts, flags);
    } catch (e) {
      tried.push(`${path} (${e instanceof Error ? e.message : String(e)})`);
      continue;
    }
    if (!adapter) {
      tried.push(
        path === 'native' ? 'native (Vulkan/Metal/D3D12): no adapter' : 'opengles (Mesa llvmpipe via EGL): no adapter',
      );
      continue;
    }
    return openDevice(path, gpu, adapter, mod.globals as DawnGlobals, [
      ...toggles.enable,
      ...toggles.disable.map((t) => `no ${t}`),
    ]);
  }
  throw new NoAdapterError(tried.length > 0 ? tried : ['no path (RLVR_WEBGPU_PATHS=none)']);
}
