import { describe, expect, it } from 'vitest';
import * as T from '../../src/index.js';

/** `readBackBytes` counts what a backend's reads copy to the host, and nothing else: kernels read in place. */
describe.each([
  ['reference', () => new T.ReferenceBackend()],
  ['cpu', () => new T.CpuBackend({ threads: 1 })],
] as const)('readBackBytes on %s', (_, make) => {
  it('adds the bytes of each read, sync or not, per backend instance; ops and uploads add nothing', async () => {
    const backend = make();
    const other = make();
    const x = T.tensor(
      Array.from({ length: 12 }, (_, i) => i),
      [3, 4],
      { backend },
    );
    const y = T.matmul(x, T.transpose(x));
    expect(T.readBackBytes(backend)).toBe(0);
    x.dataSync();
    expect(T.readBackBytes(backend)).toBe(48);
    await T.tensor([1, 2], [2], { dtype: 'f64', backend }).data();
    expect(T.readBackBytes(backend)).toBe(64);
    await y.data();
    expect(T.readBackBytes(backend)).toBe(64 + 36);
    expect(T.readBackBytes(other)).toBe(0);
    T.resetReadBackBytes(backend);
    expect(T.readBackBytes(backend)).toBe(0);
    backend.dispose();
    other.dispose();
  });
});
