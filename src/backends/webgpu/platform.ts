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
 * One Dawn instance per path for the whole process, never released: Dawn aborts the process if an instance is
 * garbage-collected while a device from it lives, and tearing instances down while others run raced inside
 * Mesa (pthread assertions). Each backend still gets its own adapter and device, destroyed on dispose.
 */
const instances = new Map<DawnPath, GPU>();

/** Load Dawn once, after setting what its EGL (llvmpipe) path reads at load time. */
function loadDawn(): Promise<DawnModule> {
  if (process.env.EGL_PLATFORM === undefined) process.env.EGL_PLATFORM = 'surfaceless';
  dawn ??= import('webgpu') as Promise<DawnModule>;
  return dawn;
}

async function tryPath(mod: DawnModule, path: DawnPath, opts: AcquireOptions): Promise<[GPU, GPUAdapter | null]> {
  let gpu = instances.get(path);
  if (!gpu) {
    gpu = mod.create(path === 'native' ? [] : ['backend=opengles']);
    instances.set(path, gpu);
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
      [gpu, adapter] = await tryPath(mod, path, opts);
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
    return openDevice(path, gpu, adapter, mod.globals as DawnGlobals);
  }
  throw new NoAdapterError(tried.length > 0 ? tried : ['no path (RLVR_WEBGPU_PATHS=none)']);
}
