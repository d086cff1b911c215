/**
 * WebGPU device acquisition: the types of the one interface the backend gets its device through,
 * `acquireDevice(opts): Promise<AcquiredDevice>`. Two implementations of it, picked when the code is bundled:
 *  - in Node (`platform.ts`): Dawn (npm `webgpu`), trying the adapter paths in order: `native`, the platform's own
 *    backend (Vulkan on Linux, Metal on macOS, D3D12 on Windows), then `opengles`, Mesa's llvmpipe through
 *    OpenGL ES on a Linux machine without a GPU;
 *  - in a page or a worker (`platform.browser.ts`, swapped in by the browser build): `navigator.gpu`, path
 *    `navigator`.
 * If none gives an adapter, a typed `NoAdapterError` says what was tried and what to install. The device is
 * requested with the adapter's real limits: the defaults (128 invocations per workgroup in compatibility mode)
 * are too small.
 */
export type AdapterPath = 'native' | 'opengles' | 'navigator';

export interface AcquireOptions {
  /**
   * Paths to try, in order. Default in Node: the environment variable RLVR_WEBGPU_PATHS (comma-separated, `none`
   * for no path at all, which makes acquisition fail as on a machine without an adapter), else native, then
   * opengles. In a page: `navigator` (an empty list fails as `none` does).
   */
  readonly paths?: readonly AdapterPath[];
  readonly powerPreference?: GPUPowerPreference;
  /**
   * Dawn's `skip_validation` and `disable_robustness` toggles (Node only; a page cannot set toggles): no API
   * validation on the host and no bounds clamping in the shaders. Every kernel spec passes with them, but a bug
   * that validation would have caught may then corrupt memory instead of failing. Default: RLVR_WEBGPU_FAST=1.
   */
  readonly fast?: boolean;
  /**
   * Dawn's `vulkan_enable_f16_on_nvidia` toggle (Node only), which exposes `shader-f16` on NVIDIA drivers that Dawn
   * blocks it on. Default: RLVR_WEBGPU_F16=force.
   */
  readonly forceF16?: boolean;
}

export interface AdapterDescription {
  readonly path: AdapterPath;
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  /** One line for logs and benchmark reports. */
  readonly summary: string;
  /** Dawn toggles the device was made with (`[]` in a page), for reports. */
  readonly toggles: readonly string[];
}

export interface AcquiredDevice {
  /**
   * The GPU object (a Dawn instance in Node, `navigator.gpu` in a page) and the adapter the device came from.
   * Whoever holds the device must hold these too: if a Dawn instance is garbage-collected while its device
   * lives, Dawn aborts the process.
   */
  readonly gpu: GPU;
  readonly gpuAdapter: GPUAdapter;
  readonly device: GPUDevice;
  readonly adapter: AdapterDescription;
  /** GPUBufferUsage, GPUMapMode, ...: Dawn's `globals` in Node (which does not define them), the page's own globals. */
  readonly globals: DawnGlobals;
}

export interface DawnGlobals {
  readonly GPUBufferUsage: { readonly [k in 'MAP_READ' | 'COPY_SRC' | 'COPY_DST' | 'STORAGE' | 'UNIFORM']: number };
  readonly GPUMapMode: { readonly READ: number };
  readonly [name: string]: unknown;
}
