import { countReadBack, type KernelTensor, type MemoryInfo, type Storage } from '../../core/backend.js';
import type { DType, HostArray, TypedArray } from '../../core/dtype.js';
import { HeapMemory, type HostBackend } from './host.js';
// Each family registers its kernels for 'reference' when it loads.
import './elementwise.js';
import './movement.js';
import './indexing.js';
import './reduce.js';
import './matmul.js';
import './rows.js';
import './fused.js';
import './sampling.js';

export type { HostBackend } from './host.js';

/**
 * The reference backend: plain TypeScript loops over typed arrays, one thread, every kernel registered for
 * `'reference'` (the files of this folder, free functions taking the backend first). Storage is the typed array
 * itself. It is the numerical reference the other backends are compared with, and the fallback of the host
 * backends (`fallbackKernels: 'reference'`), which run these kernels on their own storage.
 */
export class ReferenceBackend implements HostBackend {
  readonly name = 'reference';
  readonly synchronous = true;
  // Every kernel loops rows in a fixed order whatever the batch's shape (see ARCHITECTURE.md, exactness).
  readonly batchInvariant = true;
  private readonly heap = new HeapMemory();

  describe(): string {
    return 'reference (TypeScript kernels, one thread)';
  }

  supportsDType(): boolean {
    return true;
  }

  alloc(dtype: DType, size: number): TypedArray {
    return this.heap.alloc(dtype, size);
  }

  upload(values: HostArray, dtype: DType): Storage {
    return this.heap.upload(values, dtype);
  }

  read(x: KernelTensor): Promise<TypedArray> {
    return Promise.resolve(this.readSync(x));
  }

  readSync(x: KernelTensor): TypedArray {
    const out = this.heap.readSync(x);
    countReadBack(this, out.byteLength);
    return out;
  }

  free(storage: Storage): void {
    this.heap.free(storage);
  }

  memory(): MemoryInfo {
    return this.heap.memory();
  }

  dispose(): void {}
}
