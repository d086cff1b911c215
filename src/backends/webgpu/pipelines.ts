import { GpuValidationError } from './errors.js';

/**
 * Compute pipelines cached by key (a kernel name plus what its generated source depends on: dtype, rank,
 * variant), so one pipeline serves every shape: shapes travel in uniforms. Bind-group layouts are explicit.
 *
 * Every pipeline is created inside a validation error scope. The op layer calls kernels synchronously, so the
 * scope's verdict arrives after the first dispatch is encoded: the entry is cached as `validating`; if it fails,
 * it is evicted and the runtime records a typed error naming the kernel, which the next `read()` (and every
 * later call) throws. A batch that used a failed pipeline is itself invalid, so its results are never read.
 */
export type BindingKind = 'read' | 'write' | 'uniform';

export interface KernelSpec {
  /** The kernel's name, as errors report it (e.g. `matmul`, `unary.exp`). */
  readonly kernel: string;
  /** Everything the source depends on; defaults to the kernel name. */
  readonly key: string;
  readonly bindings: readonly BindingKind[];
  readonly source: () => string;
  readonly entryPoint?: string;
}

export interface CachedPipeline {
  readonly kernel: string;
  readonly label: string;
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
  /** Identifies the pipeline and its layout in bind-group cache keys. */
  readonly cacheKey: string;
  state: 'validating' | 'valid';
}

const bindingLayout = (kind: BindingKind, binding: number): GPUBindGroupLayoutEntry => ({
  binding,
  visibility: 0x4, // GPUShaderStage.COMPUTE
  buffer: { type: kind === 'read' ? 'read-only-storage' : kind === 'write' ? 'storage' : 'uniform' },
});

export class PipelineCache {
  private readonly cache = new Map<string, CachedPipeline>();
  private readonly layouts = new Map<string, GPUBindGroupLayout>();
  private readonly validations = new Set<Promise<void>>();

  constructor(
    private readonly device: GPUDevice,
    private readonly onError: (e: GpuValidationError) => void,
  ) {}

  get size(): number {
    return this.cache.size;
  }

  get(spec: KernelSpec): CachedPipeline {
    const hit = this.cache.get(spec.key);
    if (hit) return hit;
    const layout = this.layout(spec.bindings);
    const label = `rlvr:${spec.kernel}`;
    const code = spec.source();
    this.device.pushErrorScope('validation');
    const module = this.device.createShaderModule({ code, label });
    const pipeline = this.device.createComputePipeline({
      label,
      layout: this.device.createPipelineLayout({ bindGroupLayouts: [layout], label }),
      compute: { module, entryPoint: spec.entryPoint ?? 'main' },
    });
    const cacheKey = `${label}|${spec.bindings.join(',')}`;
    const entry: CachedPipeline = { kernel: spec.kernel, label, pipeline, layout, cacheKey, state: 'validating' };
    this.cache.set(spec.key, entry);
    const check = this.device
      .popErrorScope()
      .then(async (error) => {
        if (!error) {
          entry.state = 'valid';
          return;
        }
        this.cache.delete(spec.key);
        const info = await module.getCompilationInfo().catch(() => null);
        const lines = info?.messages.map((m) => `${m.type} at ${m.lineNum}:${m.linePos}: ${m.message}`).join('; ');
        this.onError(
          new GpuValidationError(
            spec.kernel,
            `pipeline ${spec.key} failed validation: ${error.message}${lines ? ` [${lines}]` : ''}`,
          ),
        );
      })
      .finally(() => this.validations.delete(check));
    this.validations.add(check);
    return entry;
  }

  /** Resolves once every pipeline created so far has been validated (failures go to `onError`). */
  async settled(): Promise<void> {
    while (this.validations.size > 0) await Promise.all([...this.validations]);
  }

  private layout(bindings: readonly BindingKind[]): GPUBindGroupLayout {
    const key = bindings.join(',');
    let layout = this.layouts.get(key);
    if (!layout) {
      layout = this.device.createBindGroupLayout({
        entries: bindings.map(bindingLayout),
        label: `rlvr:layout(${key})`,
      });
      this.layouts.set(key, layout);
    }
    return layout;
  }
}
