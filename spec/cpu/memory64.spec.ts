import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { useMemory64, type AddressingChoice } from '../../src/backends/cpu/kernels-module.js';
import { tinyRun } from '../training/helpers/tiny-run.js';

/**
 * The memory64 build is taken only where a run's estimate exceeds what the 32-bit memory holds and memory64 holds
 * more (the runtime has it, the memory is shared, `memoryLimitBytes` does not bind first); every other run keeps
 * the faster 32-bit build. A refusal names the limit of the build in use, and what would fit.
 */
const GIB = 1024 ** 3;
const WASM32 = 4 * GIB - 2 * 1024 ** 2;
const available = T.runtimeHasMemory64();

/**
 * An `onMemoryEstimate` for a spec whose run must be refused: it records the estimate, and stops the run at once
 * where the estimate is not in (low, high], the range the spec's model was sized for (a change to the estimate can
 * move it), instead of letting the run train a model of billions of bytes for minutes.
 */
const onlyBetween =
  (low: number, high: number, record: (total: number) => void) =>
  (m: T.MemoryEstimate): void => {
    record(m.total);
    if (!(m.total > low && m.total <= high))
      throw new Error(`the spec's model is estimated at ${m.total} bytes, outside (${low}, ${high}]: resize it`);
  };

describe('useMemory64: which build a backend takes', () => {
  const base: AddressingChoice = {
    estimateBytes: 5 * GIB,
    wasm32Bytes: WASM32,
    limitBytes: Number.POSITIVE_INFINITY,
    shared: true,
    hasMemory64: true,
  };
  it.each<[string, Partial<AddressingChoice>, boolean]>([
    ['an estimate past the 32-bit memory, on a runtime with memory64', {}, true],
    ['an estimate within the 32-bit memory', { estimateBytes: 3 * GIB }, false],
    ['an estimate exactly what the 32-bit memory holds', { estimateBytes: WASM32 }, false],
    ['no estimate yet (a backend opened before its run)', { estimateBytes: 0 }, false],
    ['a runtime without memory64 (Node < 24)', { hasMemory64: false }, false],
    ['an unshared memory (a page without cross-origin isolation)', { shared: false }, false],
    ['a memoryLimitBytes at or below the 32-bit memory: it binds first', { limitBytes: WASM32 }, false],
    ['a memoryLimitBytes above the 32-bit memory', { limitBytes: 8 * GIB }, true],
    ['an estimate past memory64 too (its refusal names the larger limit)', { estimateBytes: 40 * GIB }, true],
    ['memory64 asked for, whatever the estimate', { estimateBytes: 1, requested: true }, true],
    ['memory64 turned off, whatever the estimate', { requested: false }, false],
  ])('%s', (_, over, want) => {
    expect(useMemory64({ ...base, ...over })).toBe(want);
  });
});

describe.runIf(available)('a cpu backend on a runtime with memory64 (Node >= 24)', () => {
  it('opens on the 32-bit build and takes memory64 only for an estimate past it, with the same results', () => {
    const b = new T.CpuBackend({ threads: 2 });
    expect(b.memory64).toBe(false);
    expect(b.maxMemoryBytes).toBe(WASM32);
    b.reserveFor(3 * GIB);
    expect(b.memory64).toBe(false);
    b.reserveFor(5 * GIB);
    expect(b.memory64).toBe(true);
    expect(b.maxMemoryBytes).toBe(16 * GIB - 2 * 1024 ** 2);
    expect(b.memoryNote).toBe("the cpu backend's WebAssembly memory64: 16 GiB at most, V8's limit for one memory");
    expect(b.describe()).toMatch(/kernels, memory64, 2 threads/);
    // The same kernels on the new memory: a product and its gradient bit for bit as on the 32-bit build.
    const run = (backend: T.Backend): number[][] =>
      T.tidy(() => {
        const rng = new T.Rng(4);
        const [value, grads] = T.valueAndGrad((p: T.Tensor[]) => T.sum(T.square(T.matmul(p[0]!, p[1]!))))([
          T.randn([33, 70], rng, { backend }),
          T.randn([70, 21], rng, { backend }),
        ]);
        return [value, ...grads].map((t) => Array.from(t.dataSync()));
      });
    const wasm32 = new T.CpuBackend({ threads: 2 });
    expect(run(b)).toEqual(run(wasm32));
    b.dispose();
    wasm32.dispose();
  });

  it('keeps the 32-bit build where memory64 holds no more, is turned off, or comes too late, and says why', () => {
    const limited = new T.CpuBackend({ threads: 1, memoryLimitBytes: 2 * GIB });
    limited.reserveFor(5 * GIB);
    expect(limited.memory64).toBe(false);
    expect(limited.memoryNote).toBe("the cpu backend's memoryLimitBytes");
    const off = new T.CpuBackend({ threads: 1, memory64: false });
    off.reserveFor(5 * GIB);
    expect(off.memory64).toBe(false);
    expect(off.memoryNote).toMatch(/4 GiB at most, one 32-bit memory; memory64 \(up to 16 GiB\) was turned off/);
    const holding = new T.CpuBackend({ threads: 1 });
    const t = T.ones([4], { backend: holding });
    holding.reserveFor(5 * GIB);
    expect(holding.memory64).toBe(false);
    expect(holding.memoryNote).toMatch(/held tensors before the run was estimated.*\{ memory64: true \}/);
    expect(Array.from(t.dataSync())).toEqual([1, 1, 1, 1]);
    t.dispose();
    for (const b of [limited, off, holding]) b.dispose();
  });

  it('a run estimated past memory64 too is refused naming the memory64 limit, after the switch', async () => {
    const backend = new T.CpuBackend({ threads: 1 });
    // 1.07B parameters, 21 GiB estimated. The 1000 GiB limit (over the host's memory, allowed) leaves memory64's
    // 16 GiB as what binds on any host.
    const cfg = tinyRun({
      model: { dModel: 2048, nLayers: 16, nHeads: 16, nKvHeads: 16, dFf: 8192, maxSeqLen: 24 },
      memoryLimitGb: 1000,
      allowOverHostMemory: true,
    });
    let estimate = 0;
    const e = await T.train(cfg, {
      backend,
      onMemoryEstimate: onlyBetween(16 * GIB, Infinity, (m) => (estimate = m)),
    }).catch((x) => x);
    expect(estimate).toBeGreaterThan(16 * GIB);
    expect(e).toBeInstanceOf(T.MemoryError);
    expect((e as Error).message).toMatch(
      /needed, 16\.00 GiB available \(the cpu backend's WebAssembly memory64: 16 GiB at most, V8's limit for one memory\)/,
    );
    expect((e as Error).message).toMatch(/What would fit: --backend webgpu/);
    expect(backend.memory64).toBe(true);
    expect(backend.poolStats().heapBytes).toBe(0);
    backend.dispose();
  });
});

describe.runIf(!available)('a cpu backend on a runtime without memory64 (Node < 24)', () => {
  it('keeps the 32-bit build; a run past it is refused naming its 4 GiB, and Node >= 24 as what would fit', async () => {
    expect(() => new T.CpuBackend({ threads: 1, memory64: true })).toThrow(/memory64.*Node >= 24/);
    const backend = new T.CpuBackend({ threads: 1 });
    // 268M parameters, 5.3 GiB estimated: past the 32-bit memory, within memory64.
    const cfg = tinyRun({
      model: { dModel: 2048, nLayers: 4, nHeads: 16, nKvHeads: 16, dFf: 8192, maxSeqLen: 24 },
      memoryLimitGb: 1000,
      allowOverHostMemory: true,
    });
    let estimate = 0;
    const e = await T.train(cfg, {
      backend,
      onMemoryEstimate: onlyBetween(4 * GIB, 16 * GIB, (m) => (estimate = m)),
    }).catch((x) => x);
    expect(estimate).toBeGreaterThan(4 * GIB);
    expect(estimate).toBeLessThan(16 * GIB);
    expect(e).toBeInstanceOf(T.MemoryError);
    const m = (e as Error).message;
    expect(m).toMatch(
      /needed, 4\.00 GiB available \(the cpu backend's WebAssembly memory: 4 GiB at most, one 32-bit memory; this runtime has no memory64/,
    );
    expect(m).toMatch(/What would fit: .*Node >= 24, whose WebAssembly memory64 holds up to 16 GiB \([\d.]+ GiB\)/);
    expect(backend.memory64).toBe(false);
    backend.dispose();
  });
});
