import type { AcquiredDevice, AdapterDescription, AdapterPath, DawnGlobals } from './device.js';

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

function describe(path: AdapterPath, info: GPUAdapterInfo, toggles: readonly string[]): AdapterDescription {
  const vendor = info.vendor ?? '';
  const architecture = info.architecture ?? '';
  const device = info.device ?? '';
  const description = info.description ?? '';
  const named = [vendor, architecture, device, description].filter((s) => s !== '').join(' / ');
  const summary = `${path}: ${named || 'unknown adapter'}`;
  return { path, vendor, architecture, device, description, summary, toggles };
}

/** The device of an adapter that a platform found, requested with the adapter's own limits. Shared by both platforms. */
export async function openDevice(
  path: AdapterPath,
  gpu: GPU,
  adapter: GPUAdapter,
  globals: DawnGlobals,
  toggles: readonly string[] = [],
): Promise<AcquiredDevice> {
  const requiredLimits: Record<string, number> = {};
  const limits = adapter.limits as unknown as Record<string, number | undefined>;
  for (const name of LIMITS) {
    const v = limits[name];
    if (typeof v === 'number') requiredLimits[name] = v;
  }
  // Per-kernel GPU times (RLVR_PROFILE=1) and the step timeline need timestamp queries; half-precision kernels
  // need shader-f16. Each is requested whenever the adapter offers it.
  const requiredFeatures = (['timestamp-query', 'shader-f16'] as const).filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures, label: 'rlvr-webgpu' });
  return { gpu, gpuAdapter: adapter, device, adapter: describe(path, adapter.info, toggles), globals };
}
