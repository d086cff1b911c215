import { describe, expect, it } from 'vitest';
import { BindGroupCache } from '../../src/backends/webgpu/bind-groups.js';
import type { CachedPipeline } from '../../src/backends/webgpu/pipelines.js';
import type { UniformSlot } from '../../src/backends/webgpu/uniforms.js';

/**
 * The bind-group cache on a stand-in device (createBindGroup records its entries): a repeated launch hits, any
 * change of buffer, order, uniform slot or kernel misses, and a recycled uniform store drops every group.
 */
function cacheOf() {
  const made: { entries: GPUBindGroupEntry[]; label?: string }[] = [];
  const store = { generation: 0 };
  const device = {
    createBindGroup(d: GPUBindGroupDescriptor) {
      const g = { entries: [...d.entries], label: d.label };
      made.push(g);
      return g as unknown as GPUBindGroup;
    },
  } as unknown as GPUDevice;
  const cache = new BindGroupCache(device, store, () => {});
  return { cache, made, store };
}

const buffer = (n: number) => ({ n }) as unknown as GPUBuffer;
const pipeline = (key: string) => ({ cacheKey: key, label: `rlvr:${key}`, layout: {} }) as unknown as CachedPipeline;
const slot = (n: number): UniformSlot => ({ binding: { buffer: buffer(100 + n), offset: 256 * n, size: 16 } });

describe('BindGroupCache', () => {
  it('returns the group it made for the same kernel, buffers and uniform slot, and makes one otherwise', () => {
    const { cache, made } = cacheOf();
    const [a, b, c] = [buffer(1), buffer(2), buffer(3)];
    const p = pipeline('add|r,r,w');
    const u = slot(1);
    const g = cache.get(p, [a, b, c], u);
    expect(cache.get(p, [a, b, c], u)).toBe(g);
    expect(made).toHaveLength(1);
    // Each of these differs in one thing: a buffer, the order, the slot, no slot, the kernel.
    const others = [
      cache.get(p, [a, b, buffer(4)], u),
      cache.get(p, [b, a, c], u),
      cache.get(p, [a, b, c], slot(2)),
      cache.get(p, [a, b, c], null),
      cache.get(pipeline('mul|r,r,w'), [a, b, c], u),
    ];
    expect(made).toHaveLength(6);
    expect(new Set([g, ...others]).size).toBe(6);
    // The group binds what it was asked for, in binding order, the uniform slot last.
    expect(made[2]!.entries.map((e) => (e.resource as GPUBufferBinding).buffer)).toEqual([b, a, c, u.binding.buffer]);
    expect(made[4]!.entries).toHaveLength(3);
  });

  it('drops every group when the uniform store is recycled (old slots name other contents)', () => {
    const { cache, made, store } = cacheOf();
    const p = pipeline('add|r,w');
    const bs = [buffer(1), buffer(2)];
    const u = slot(1);
    const g = cache.get(p, bs, u);
    expect(cache.get(p, bs, u)).toBe(g);
    store.generation++;
    const again = cache.get(p, bs, u);
    expect(again).not.toBe(g);
    expect(made).toHaveLength(2);
  });
});
