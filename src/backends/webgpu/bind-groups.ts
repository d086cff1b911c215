import type { CachedPipeline } from './pipelines.js';
import type { UniformSlot, UniformStore } from './uniforms.js';

/** Cached bind groups kept before the cache is cleared (a bound on what a changing workload can pin). */
const MAX_BIND_GROUPS = 16_384;

/**
 * Bind groups cached by (pipeline, buffer ids, uniform slot), so repeated work (every step of a training loop)
 * creates none. A buffer's id is given the first time it is bound. When the uniform store is recycled
 * (uniforms.ts), bind groups naming its old slots can never be hit again, and the cache is dropped.
 */
export class BindGroupCache {
  private readonly groups = new Map<string, GPUBindGroup>();
  private generation = 0;
  private readonly bufferIds = new WeakMap<GPUBuffer, number>();
  private nextBufferId = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly uniforms: Pick<UniformStore, 'generation'>,
    /** Called for every bind group created (a cache miss each). */
    private readonly created: () => void,
  ) {}

  get(cached: CachedPipeline, buffers: readonly GPUBuffer[], uniform: UniformSlot | null): GPUBindGroup {
    if (this.generation !== this.uniforms.generation) {
      // The uniform store was recycled: bind groups naming its old slots can never be hit again.
      this.groups.clear();
      this.generation = this.uniforms.generation;
    }
    let key = cached.cacheKey;
    for (const b of buffers) key += `,${this.idOf(b)}`;
    if (uniform) key += `|${uniform.id}`;
    const hit = this.groups.get(key);
    if (hit) return hit;
    const entries: GPUBindGroupEntry[] = buffers.map((buffer, binding) => ({ binding, resource: { buffer } }));
    if (uniform) entries.push({ binding: entries.length, resource: uniform.binding });
    const group = this.device.createBindGroup({ layout: cached.layout, entries, label: cached.label });
    this.created();
    if (this.groups.size >= MAX_BIND_GROUPS) this.groups.clear();
    this.groups.set(key, group);
    return group;
  }

  private idOf(buffer: GPUBuffer): number {
    let id = this.bufferIds.get(buffer);
    if (id === undefined) {
      id = this.nextBufferId++;
      this.bufferIds.set(buffer, id);
    }
    return id;
  }

  clear(): void {
    this.groups.clear();
  }
}
