import type { RlvrError } from '../../core/errors.js';
import { DeviceLostError, GpuValidationError } from './errors.js';

/**
 * How the runtime's errors never pass silently. Everything done between two submits (or reads,
 * `errorScopes: 'read'`) runs inside one validation and one out-of-memory error scope (two pushes and two pops
 * per span, nothing per dispatch); their verdicts,
 * the pipelines' own scopes (`fail(e, true)`: a failed pipeline is the root cause of the batch errors that follow
 * it, so it takes precedence), the `uncapturederror` listener and `device.lost` all end in one sticky typed error
 * that names the kernel, which the runtime's `check()` throws at the next `read()` and every later call.
 */
export class ErrorScopes {
  private failure: RlvrError | null = null;
  private rootCause = false;
  private scopeOpen = false;
  /** The kernels encoded inside the open scopes, named by a verdict whose message names none. */
  private batchKernels = new Set<string>();
  private readonly checks = new Set<Promise<void>>();
  /** The kernel dispatched last, named by a failure nothing else attributes. */
  lastKernel = '(none)';

  constructor(
    private readonly device: GPUDevice,
    disposed: () => boolean,
  ) {
    device.addEventListener('uncapturederror', (ev) => {
      const error = (ev as GPUUncapturedErrorEvent).error;
      this.fail(new GpuValidationError(this.kernelIn(error.message), error.message, kindOf(error)));
    });
    void device.lost.then((info) => {
      if (!disposed()) this.fail(new DeviceLostError(info.reason ?? 'unknown', info.message, this.lastKernel));
    });
  }

  /** The first error recorded, if any. */
  get error(): RlvrError | null {
    return this.failure;
  }

  fail(e: RlvrError, root = false): void {
    if (this.failure && (this.rootCause || !root)) return;
    this.failure = e;
    this.rootCause = root;
  }

  /** A kernel (or a read's copy) encoded in this batch. */
  note(kernel: string): void {
    this.batchKernels.add(kernel);
  }

  /** The kernel a Dawn message names through our `rlvr:` labels, else the kernels of the current batch. */
  private kernelIn(message: string, fallback: Iterable<string> = this.batchKernels): string {
    const infra = ['batch', 'uniforms', 'tensor', 'staging', 'read', 'profile'];
    const labels = [...message.matchAll(/rlvr:([^"\]\s]+)/g)].map((m) => m[1]!);
    const named = [...new Set(labels)].filter((k) => !k.startsWith('layout') && !infra.includes(k));
    if (named.length > 0) return named.join(', ');
    const batch = [...fallback];
    return batch.length > 0 ? `one of ${batch.join(', ')}` : this.lastKernel;
  }

  /** Open the batch's error scopes before the first device call of a batch. */
  open(): void {
    if (this.scopeOpen) return;
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    this.scopeOpen = true;
  }

  /** Close them at the batch's submit; their verdicts arrive later (`settled`). */
  close(): void {
    if (!this.scopeOpen) return;
    this.scopeOpen = false;
    const kernels = [...this.batchKernels];
    this.batchKernels = new Set();
    const validation = this.device.popErrorScope();
    const oom = this.device.popErrorScope();
    this.track(
      Promise.all([validation, oom]).then(([v, o]) => {
        for (const e of [v, o])
          if (e) this.fail(new GpuValidationError(this.kernelIn(e.message, kernels), e.message, kindOf(e)));
      }),
    );
  }

  private track(p: Promise<void>): void {
    const q = p
      .catch((e: unknown) => this.fail(new GpuValidationError(this.lastKernel, String(e))))
      .finally(() => this.checks.delete(q));
    this.checks.add(q);
  }

  /** Resolves once every closed scope's verdict has come back (and been recorded). */
  async settled(): Promise<void> {
    while (this.checks.size > 0) await Promise.all([...this.checks]);
  }
}

function kindOf(e: GPUError): 'validation' | 'out-of-memory' | 'internal' {
  const name = e.constructor.name;
  return name.includes('OutOfMemory') ? 'out-of-memory' : name.includes('Internal') ? 'internal' : 'validation';
}
