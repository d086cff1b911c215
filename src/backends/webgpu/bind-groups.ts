import type { CachedPipeline } from './pipelines.js';
import type { UniformSlot, UniformStore } from './uniforms.js';

/** Cached bind groups kept before the cache is cleared (a bound on what a changing workload can pin). */
const MAX_BIND_GROUPS = 16_384;

/** One level of the cache: a binding's buffer (or, last, the uniform slot) to the next level or the group. */
type Level = Map<object, unknown>;

/** The key of the last level when a kernel has no uniform block. */
const NO_UNIFORM = {};

/**
 * Bind groups cached by (kernel and layout, buffers, uniform slot), so repeated work (every step of a training loop)
 * creates none. The key is a path of object identities, one map per binding, so a hit builds no string and
 * reads no native getter (a dispatch's host cost). When the uniform store is recycled (uniforms.ts), bind
 * groups naming its old slots can never be hit again, and the cache is dropped.
 */
export class BindGroupCache {
  /** By the pipeline's cache key (its kernel and layout: pipelines sharing both share bind groups). */
  private readonly roots = new Map<string, Level>();
  private count = 0;
  private generation = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly uniforms: Pick<UniformStore, 'generation'>,
    /** Called for every bind group created (a cache miss each). */
    private readonly created: () => void,
  ) {}

  get(cached: CachedPipeline, buffers: readonly GPUBuffer[], uniform: UniformSlot | null): GPUBindGroup {
    if (this.generation !== this.uniforms.generation) {
      // The uniform store was recycled: bind groups naming its old slots can never be hit again.
      this.clear();
      this.generation = this.uniforms.generation;
    }
    // A bound on what a changing workload can pin: start over once the cap is reached.
    if (this.count >= MAX_BIND_GROUPS) this.clear();
    let level = this.roots.get(cached.cacheKey);
    if (!level) {
      level = new Map();
      this.roots.set(cached.cacheKey, level);
    }
    for (const b of buffers) {
      let next = level.get(b) as Level | undefined;
      if (!next) {
        next = new Map();
        level.set(b, next);
      }
      level = next;
    }
    const last = uniform ?? NO_UNIFORM;
    const hit = level.get(last) as GPUBindGroup | undefined;
    if (hit) return hit;
    const entries: GPUBindGroupEntry[] = buffers.map((buffer, binding) => ({ binding, resource: { buffer } }));
    if (uniform) entries.push({ binding: entries.length, resource: uniform.binding });
    const group = this.device.createBindGroup({ layout: cached.layout, entries, label: cached.label });
    this.created();
    level.set(last, group);
    this.count++;
    return group;
  }

  clear(): void {
    this.roots.clear();
    this.count = 0;
  }
}
