import { RlvrError } from '../../core/errors.js';

/** Typed errors of the WebGPU backend. Each names what failed: the adapter search, or the kernel. */

/** What to install in Node when Dawn finds no adapter. */
export const NODE_ADVICE =
  'On a GPU machine install the Vulkan loader and driver (Debian/Ubuntu: libvulkan1 plus the vendor ICD); ' +
  'on a Linux machine without a GPU install Mesa (apt-get install libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri) ' +
  'for llvmpipe through OpenGL ES. Otherwise use the CPU backend.';

/** What to do in a page without an adapter. */
export const PAGE_ADVICE =
  'Use a browser with WebGPU enabled (a recent Chrome, Edge, Safari or Firefox; headless Chromium needs ' +
  '--enable-unsafe-webgpu). Otherwise use the CPU backend.';

/** No WebGPU adapter could be found. The caller may fall back to the CPU backend. */
export class NoAdapterError extends RlvrError {
  constructor(
    readonly tried: readonly string[],
    advice: string = NODE_ADVICE,
  ) {
    super(`no WebGPU adapter: tried ${tried.join('; ')}. ${advice}`);
  }
}

/** A shader, pipeline, bind group or command failed WebGPU validation (or ran out of memory). */
export class GpuValidationError extends RlvrError {
  constructor(
    readonly kernel: string,
    readonly gpuMessage: string,
    readonly kind: 'validation' | 'out-of-memory' | 'internal' = 'validation',
  ) {
    super(`webgpu kernel ${kernel}: ${kind} error: ${gpuMessage}`);
  }
}

/** The device was lost (driver reset, process limits, ...). The backend is unusable afterwards. */
export class DeviceLostError extends RlvrError {
  constructor(
    readonly reason: string,
    readonly gpuMessage: string,
    readonly kernel: string,
  ) {
    super(`webgpu device lost (${reason}) after kernel ${kernel}: ${gpuMessage}`);
  }
}

/** A recorded step (`recordStep`) was asked for something a replay cannot do, or used after its end. */
export class RecordingError extends RlvrError {
  constructor(readonly what: string) {
    super(`recorded step: ${what}`);
  }
}
