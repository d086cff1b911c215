import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { HeapMemory } from '../../src/backends/reference/host.js';
import { layerNorm as referenceLayerNorm } from '../../src/backends/reference/rows.js';
import { BACKEND_NAMES, openBackend } from '../../src/backends/registry.js';
// Loading the WebGPU backend's module registers its kernels (no device needed for that).
import '../../src/backends/webgpu/index.js';

/**
 * The kernel registry (`core/kernels.ts`): kernels keyed by (kernel, backend name), a backend's table resolved
 * with its fallback's kernels counted, typed errors for a missing or doubly registered kernel.
 */

/** A host backend with no kernels of its own and the given fallback (or none). */
class StubBackend implements T.HostBackend {
  readonly synchronous = true;
  readonly batchInvariant = true;
  private readonly heap = new HeapMemory();
  constructor(
    readonly name: string,
    readonly fallbackKernels?: string,
  ) {}
  describe(): string {
    return `${this.name} (spec stub)`;
  }
  supportsDType(): boolean {
    return true;
  }
  alloc(dtype: T.DType, size: number): T.TypedArray {
    return this.heap.alloc(dtype, size);
  }
  upload(values: T.TypedArray, dtype: T.DType): T.Storage {
    return this.heap.upload(values, dtype);
  }
  read(x: T.KernelTensor): Promise<T.TypedArray> {
    return Promise.resolve(this.readSync(x));
  }
  readSync(x: T.KernelTensor): T.TypedArray {
    return this.heap.readSync(x);
  }
  free(storage: T.Storage): void {
    this.heap.free(storage);
  }
  memory(): T.MemoryInfo {
    return this.heap.memory();
  }
  dispose(): void {}
}

const bits = (t: T.Tensor): number[] => {
  const d = t.dataSync();
  return Array.from(new Uint32Array(d.buffer, d.byteOffset, d.byteLength / 4));
};

describe('kernel registry', () => {
  it('a kernel missing on a backend with no fallback throws MissingKernelError naming kernel and backend', () => {
    const stub = new StubBackend('stub-bare');
    T.registerKernel({
      kernelName: 'fill',
      backendName: 'stub-bare',
      kernelFunc: (b: StubBackend, shape, dtype, value) =>
        b.upload(new Float64Array(T.sizeOf(shape)).fill(value), dtype),
    });
    expect(T.full([2, 2], 3, { backend: stub }).dataSync()).toEqual(new Float32Array([3, 3, 3, 3]));
    const a = T.tensor([1, 2, 3, 4], [2, 2], { backend: stub });
    let err: unknown;
    try {
      T.matmul(a, a);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(T.MissingKernelError);
    expect(err).toBeInstanceOf(T.BackendError);
    expect(err).toMatchObject({ kernel: 'matmul', backend: 'stub-bare', fallback: undefined });
    expect((err as Error).message).toMatch(/'matmul'.*'stub-bare'.*no fallback/);
    // A fallback that lacks the kernel is named too.
    const lost = new StubBackend('stub-lost', 'nowhere');
    expect(() => T.softmax(T.tensor([1, 2], [2], { backend: lost }))).toThrow(/'softmax'.*'stub-lost'.*'nowhere'/);
  });

  it('registering a (kernel, backend) pair twice throws DuplicateKernelError', () => {
    const kernelFunc = (b: StubBackend): T.Storage => b.upload(new Float32Array(1), 'f32');
    T.registerKernel({ kernelName: 'fill', backendName: 'stub-twice', kernelFunc });
    expect(() => T.registerKernel({ kernelName: 'fill', backendName: 'stub-twice', kernelFunc })).toThrow(
      T.DuplicateKernelError,
    );
    expect(() =>
      T.registerKernels<StubBackend>('reference', { matmul: () => kernelFunc(new StubBackend('x')) }),
    ).toThrow(/kernel 'matmul' is already registered for backend 'reference'/);
    // The same kernel for another backend name is another pair.
    T.registerKernel({ kernelName: 'fill', backendName: 'stub-twice-2', kernelFunc });
    // A table with one taken kernel registers none of it.
    expect(() => T.registerKernels<StubBackend>('stub-twice-2', { cast: kernelFunc, fill: kernelFunc })).toThrow(
      T.DuplicateKernelError,
    );
    expect(T.registeredKernels('stub-twice-2')).toEqual(['fill']);
  });

  it('the reference and WebGPU backends register every kernel; cpu registers its WebAssembly ones', () => {
    expect(T.registeredKernels('reference')).toEqual(T.KERNEL_NAMES);
    expect(T.registeredKernels('webgpu')).toEqual(T.KERNEL_NAMES);
    const own = T.registeredKernels('cpu');
    for (const k of ['matmul', 'attention', 'attentionBackward', 'rmsNorm', 'swiglu', 'tokenLogProbs', 'adamwMany'])
      expect(own).toContain(k);
    for (const k of ['takeAlongAxis', 'layerNorm', 'where', 'reduce']) expect(own).not.toContain(k);
    expect(new T.CpuBackend().fallbackKernels).toBe('reference');
    expect((new T.ReferenceBackend() as T.Backend).fallbackKernels).toBeUndefined();
  });

  it('on cpu a kernel with no own registration (or a case its own does not cover) runs the reference one, counted', () => {
    const cpu = new T.CpuBackend();
    const ref = new T.ReferenceBackend();
    const a = [0.5, -1.25, 2, 3.5, -0.1, 7, 1e-3, 4];
    const b = [1.5, 2, -3, 0.25];
    const on = (backend: T.Backend): T.Tensor =>
      T.layerNorm(T.tensor(a, [2, 4], { backend }), T.tensor(b, [4], { backend }), T.tensor(b, [4], { backend }));
    T.resetFallbackCounts(cpu);
    expect(T.fallbackCounts(cpu)).toEqual({});
    const y = on(cpu);
    expect(T.fallbackCounts(cpu)).toEqual({ layerNorm: 1 });
    expect(bits(y)).toEqual(bits(on(ref)));
    on(cpu);
    expect(T.fallbackCounts(cpu)).toEqual({ layerNorm: 2 });
    // matmul is the cpu backend's own in f32, the reference one in f64.
    const m = (backend: T.Backend, dtype: T.DType): T.Tensor =>
      T.matmul(T.tensor(a, [2, 4], { backend, dtype }), T.tensor(b, [4, 1], { backend, dtype }));
    m(cpu, 'f32');
    expect(T.fallbackCounts(cpu).matmul).toBeUndefined();
    expect(Array.from(m(cpu, 'f64').dataSync())).toEqual(Array.from(m(ref, 'f64').dataSync()));
    expect(T.fallbackCounts(cpu).matmul).toBe(1);
    expect(T.fallbackCounts(ref)).toEqual({});
    // Counts are per backend instance, and a reset clears them.
    expect(T.fallbackCounts(new T.CpuBackend())).toEqual({});
    T.resetFallbackCounts(cpu);
    expect(T.fallbackCounts(cpu)).toEqual({});
    // The fallback allocates from the cpu backend's own memory.
    expect(cpu.memory().buffers).toBeGreaterThan(0);
    expect(ref.memory().buffers).toBeGreaterThan(0);
  });

  it('a training-like step in f64 on cpu (every kernel the reference one) equals the reference backend bit for bit', () => {
    const step = (backend: T.Backend): T.Tensor[] =>
      T.tidy(() => {
        const rng = new T.Rng(3);
        const x = T.randn([2, 5, 4, 8], rng, { backend, dtype: 'f64' });
        const w = T.randn([8], rng, { backend, dtype: 'f64' });
        const tokens = T.tensor([1, 0, 5, 2, 3, 4, 6, 1, 2, 0], [2, 5], { dtype: 'i32', backend });
        const embed = T.randn([7, 8], rng, { backend, dtype: 'f64' });
        const loss = (p: { x: T.Tensor; w: T.Tensor; embed: T.Tensor }): T.Tensor => {
          const q = T.rmsNorm(T.add(p.x, T.reshape(T.gather(p.embed, tokens, 0), [2, 5, 1, 8])), p.w);
          const att = T.causalAttention(q, p.x, p.x, { scale: 0.35 });
          const h = T.swiglu(att, T.layerNorm(att, p.w, p.w));
          const logits = T.matmul(T.reshape(h, [10, 32]), T.reshape(T.slice(p.embed, [0, 0], [4, 8]), [32, 1]));
          const lp = T.tokenLogProbs(T.concat([logits, T.mul(logits, 2)], 1), T.reshape(T.minimum(tokens, 1), [10]));
          return T.add(T.neg(T.mean(lp)), T.sum(T.softmax(T.reshape(h, [10, 32]), -1), [0, 1]));
        };
        const [value, grads] = T.valueAndGrad(loss)({ x, w, embed });
        const leaves = [x, w, embed];
        const gs = [grads.x, grads.w, grads.embed];
        const ss = T.sumSquares(gs);
        const hyper = { lr: 0.01, beta1: 0.9, beta2: 0.99, eps: 1e-8, step: 1, weightDecays: [0, 0.1, 0], maxNorm: 1 };
        const state = T.adamwUpdateMany(leaves, gs, gs, gs.map(T.square), ss, hyper);
        return [value, ...gs, ...state.flatMap((s) => [s.param, s.m, s.v])];
      });
    const cpu = new T.CpuBackend();
    const ref = new T.ReferenceBackend();
    const outs = step(cpu);
    const expected = step(ref);
    outs.forEach((t, i) => expect(bits(t)).toEqual(bits(expected[i]!)));
    const counts = T.fallbackCounts(cpu);
    for (const k of ['matmul', 'rmsNorm', 'attention', 'attentionBackward', 'swiglu', 'adamwMany'])
      expect(counts[k]).toBeGreaterThan(0);
    expect(Object.keys(counts).every((k) => (T.KERNEL_NAMES as readonly string[]).includes(k))).toBe(true);
  });

  it('a kernel registered for cpu after its table was resolved is used on the next call', () => {
    const cpu = new T.CpuBackend();
    const x = T.tensor([0.5, -1, 2, 3], [1, 4], { backend: cpu });
    const w = T.tensor([1, 2, 3, 4], [4], { backend: cpu });
    const before = T.kernelsFor(cpu);
    const y0 = T.layerNorm(x, w, w);
    expect(T.fallbackCounts(cpu)).toEqual({ layerNorm: 1 });
    let calls = 0;
    T.registerKernel({
      kernelName: 'layerNorm',
      backendName: 'cpu',
      kernelFunc: (b: T.CpuBackend, xx, ww, bb, eps) => {
        calls++;
        return referenceLayerNorm(b, xx, ww, bb, eps);
      },
    });
    expect(T.kernelsFor(cpu)).not.toBe(before);
    const y1 = T.layerNorm(x, w, w);
    expect(calls).toBe(1);
    expect(T.fallbackCounts(cpu)).toEqual({ layerNorm: 1 });
    expect(bits(y1)).toEqual(bits(y0));
    expect(T.registeredKernels('cpu')).toContain('layerNorm');
  });
});

describe('backends by name', () => {
  it('the registry lists cpu (the default), reference and webgpu', async () => {
    expect(BACKEND_NAMES).toEqual(['cpu', 'reference', 'webgpu']);
    expect(T.getDefaultBackend().name).toBe('cpu');
    expect(T.getDefaultBackend()).toBeInstanceOf(T.CpuBackend);
    const ref = await openBackend('reference');
    expect(ref).toBeInstanceOf(T.ReferenceBackend);
    expect(ref.describe()).toBe('reference (TypeScript kernels, one thread)');
    expect(await openBackend('reference')).toBe(ref);
    expect((await openBackend('cpu')).describe()).toMatch(
      /^cpu \(WebAssembly (relaxed SIMD \(fused multiply-add\)|SIMD) kernels, \d+ threads?/,
    );
  });
});
