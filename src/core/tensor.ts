import type { Backend, Storage } from './backend.js';
import { bytesPerElement, type DType, type TypedArray } from './dtype.js';
import { BackendError, DisposedTensorError, DonatedTensorError } from './errors.js';
import { sizeOf, type Shape } from './shape.js';
import { trackInScope } from './scope-stack.js';
import { settleDeferredChecks, throwDeferredFailure } from './deferred.js';

/** Storage shared by several tensor handles (reshape and stopGradient alias it); freed when the last one lets go. */
class DataRef {
  private refs = 1;
  constructor(
    readonly backend: Backend,
    readonly storage: Storage,
  ) {}
  retain(): void {
    this.refs++;
  }
  release(): void {
    if (--this.refs === 0) this.backend.free(this.storage);
  }
  get unique(): boolean {
    return this.refs === 1;
  }
}

let nextTensorId = 1;
let liveTensorCount = 0;

/** Tensor handles that hold at least one reference. A leak test watches this stay flat. */
export const liveTensors = (): number => liveTensorCount;

/**
 * An immutable n-dimensional array on a backend. Ops never change a tensor; they make new ones.
 *
 * Lifetime: a handle starts with one reference, owned by whoever made it (and tracked by the innermost `tidy`
 * scope, which disposes it unless it is returned). Autodiff tapes take extra references to what their vector-
 * Jacobian rules need, so a user disposing an intermediate inside a differentiated function is safe.
 */
export class Tensor {
  readonly id = nextTensorId++;
  private refs = 1;
  private ownerReleased = false;
  /** The op this handle was donated to (`consume`, `donate`): a later use names it. */
  private consumedBy: string | null = null;

  /** @internal Use the creation functions (`tensor`, `zeros`, ...) or ops instead. */
  constructor(
    private readonly ref: DataRef,
    readonly shape: Shape,
    readonly dtype: DType,
  ) {
    liveTensorCount++;
    trackInScope(this);
  }

  /** @internal Wrap freshly allocated storage (one reference, owned by the new tensor). */
  static fromStorage(backend: Backend, storage: Storage, shape: Shape, dtype: DType): Tensor {
    return new Tensor(new DataRef(backend, storage), Object.freeze([...shape]), dtype);
  }

  /** @internal A new handle over the same storage with another shape of the same size (reshape, aliases). */
  static view(x: Tensor, shape: Shape): Tensor {
    x.storageFor('view');
    x.ref.retain();
    return new Tensor(x.ref, Object.freeze([...shape]), x.dtype);
  }

  get backend(): Backend {
    return this.ref.backend;
  }
  get size(): number {
    return sizeOf(this.shape);
  }
  get rank(): number {
    return this.shape.length;
  }
  get bytes(): number {
    return this.size * bytesPerElement(this.dtype);
  }
  get isDisposed(): boolean {
    return this.refs === 0;
  }

  /** @internal The backing storage; throws if every reference has been released. */
  storageFor(op: string): Storage {
    if (this.refs === 0) throw this.disposedError(op);
    return this.ref.storage;
  }

  /** @internal Take a reference (tapes do, for what their vector-Jacobian rules read). */
  retain(): void {
    if (this.refs === 0) throw this.disposedError('retain');
    this.refs++;
  }

  /** @internal Drop a reference taken with `retain`. */
  release(): void {
    if (this.refs === 0) return;
    if (--this.refs === 0) {
      liveTensorCount--;
      this.ref.release();
    }
  }

  /**
   * @internal Whether this handle is the only reference to its storage: its owner's alone (no tape holds it, no
   * view shares the storage). Only then may an op that consumes it (`updateSlice`) write into the storage.
   */
  get uniquelyOwned(): boolean {
    return this.refs === 1 && !this.ownerReleased && this.ref.unique;
  }

  /**
   * @internal Hand the storage over to a new tensor (buffer donation): this handle dies without freeing it, so a
   * later `dispose` is a no-op and any other use throws `DonatedTensorError` naming `op`. Only when `uniquelyOwned`.
   */
  donate(op: string): Storage {
    const storage = this.storageFor(op);
    if (!this.uniquelyOwned) throw new BackendError(this.backend.name, `${op}: tensor ${this.id} is shared`);
    this.consumedBy = op;
    this.ownerReleased = true;
    this.refs = 0;
    liveTensorCount--;
    return storage;
  }

  /**
   * @internal The owner gives the handle to `op`, which did not take its storage over (a view or a tape shares it):
   * disposed as by `dispose`, and once nothing else holds it, any use throws `DonatedTensorError` naming `op`.
   */
  consume(op: string): void {
    if (this.ownerReleased) return;
    this.consumedBy = op;
    this.dispose();
  }

  /** Whether an op consumed this handle (`donate`, `consume`). */
  get isDonated(): boolean {
    return this.consumedBy !== null;
  }

  private disposedError(op: string): DisposedTensorError {
    return this.consumedBy === null
      ? new DisposedTensorError(op, this.id)
      : new DonatedTensorError(op, this.id, this.consumedBy);
  }

  /** Drop the owner's reference. Idempotent. The storage is freed once no tape needs it either. */
  dispose(): void {
    if (this.ownerReleased) return;
    this.ownerReleased = true;
    this.release();
  }

  /** Read the values back to the host (awaits the device's queue on WebGPU). */
  async data(): Promise<TypedArray> {
    // The read starts now (a caller may dispose the tensor right after asking); pending debug checks settle first.
    const values = this.backend.read({ storage: this.storageFor('data'), shape: this.shape, dtype: this.dtype });
    const [, out] = await Promise.all([settleDeferredChecks(), values]);
    return out;
  }

  /** Synchronous read; only backends with `synchronous` (the CPU) support it. */
  dataSync(): TypedArray {
    if (!this.backend.synchronous) {
      throw new BackendError(this.backend.name, 'dataSync() needs a synchronous backend; use `await tensor.data()`');
    }
    throwDeferredFailure();
    return this.backend.readSync({ storage: this.storageFor('dataSync'), shape: this.shape, dtype: this.dtype });
  }

  /** The single value of a size-1 tensor. */
  async item(): Promise<number> {
    return firstOf('item', this, await this.data());
  }

  itemSync(): number {
    return firstOf('itemSync', this, this.dataSync());
  }

  toString(): string {
    return `Tensor#${this.id}(${this.dtype}[${this.shape.join(', ')}] on ${this.backend.name})`;
  }
}

function firstOf(op: string, t: Tensor, values: TypedArray): number {
  if (t.size !== 1)
    throw new BackendError(t.backend.name, `${op}() needs a tensor of size 1, got shape [${t.shape.join(', ')}]`);
  return values[0]!;
}
