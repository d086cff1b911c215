import { RlvrError } from '../../core/errors.js';

/** Typed errors of the WebGPU backend. Each names what failed: the adapter search, or the kernel. */

/** No WebGPU adapter could be found. The caller may fall back to the CPU backend. */
export class NoAdapterError extends RlvrError {
  constructor(readonly tried: readonly string[]) {
    super(
      `no WebGPU adapter: tried ${tried.join('; ')}. ` +
        'On a GPU machine install the Vulkan loader and driver (Debian/Ubuntu: libvulkan1 plus the vendor ICD); ' +
        'on a Linux machine without a GPU install Mesa (apt-get install libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri) ' +
        'for llvmpipe through OpenGL ES. Otherwise use the CPU backend.',
    );
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
