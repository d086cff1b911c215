import type { KernelTensor, MemoryInfo, Storage } from '../../core/backend.js';
import type { DType, TypedArray } from '../../core/dtype.js';
import { HeapMemory, type HostBackend } from '../reference/host.js';
// The reference kernels this backend falls back to (registered for 'reference' when that module loads).
import '../reference/index.js';

/**
 * The CPU backend, the default one. It registers no kernel of its own yet: every kernel is the reference
 * backend's, run on this backend's storage (`fallbackKernels: 'reference'`) and counted per kernel
 * (`fallbackCounts(backend)` in `core/kernels.ts`). Fast kernels registered for `'cpu'` replace them one by one.
 * Storage is a typed array from its own counted heap (`alloc`), as a `HostBackend`'s must be for the fallback.
 */
export class CpuBackend implements HostBackend {
  readonly name = 'cpu';
  readonly synchronous = true;
  readonly fallbackKernels = 'reference';
  // Every kernel is a reference one, which loops rows in a fixed order whatever the batch's shape.
  readonly batchInvariant = true;
  private readonly heap = new HeapMemory();

  describe(): string {
    return 'cpu (no fast kernels yet: every kernel is the reference one)';
  }

  supportsDType(): boolean {
    return true;
  }

  alloc(dtype: DType, size: number): TypedArray {
    return this.heap.alloc(dtype, size);
  }

  upload(values: TypedArray, dtype: DType): Storage {
    return this.heap.upload(values, dtype);
  }

  read(x: KernelTensor): Promise<TypedArray> {
    return Promise.resolve(this.readSync(x));
  }

  readSync(x: KernelTensor): TypedArray {
    return this.heap.readSync(x);
  }

  free(storage: Storage): void {
    this.heap.free(storage);
  }

  memory(): MemoryInfo {
    return this.heap.memory();
  }

  dispose(): void {}
}
