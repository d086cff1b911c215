import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from '../webgpu/helpers.js';

/** Index ops range-checked in a debug mode on WebGPU (a check there needs a readback). */
describeGpu('WebGPU index range checks in debug mode', (gpu) => {
  it('without the debug mode an out-of-range index reads 0 there (documented; nothing is read back)', async () => {
    const x = T.tensor([1, 2, 3, 4], [4], { backend: gpu });
    expect([...(await T.gather(x, T.tensor(new Int32Array([2, 9]), [2], { backend: gpu })).data())]).toEqual([3, 0]);
  });

  it('an out-of-range gather is reported by the next read, naming the op; in range, nothing is reported', async () => {
    T.setDebugIndices(true);
    try {
      const x = T.tensor([1, 2, 3, 4], [4], { backend: gpu });
      const ok = T.gather(x, T.tensor(new Int32Array([3, 0]), [2], { backend: gpu }));
      expect([...(await ok.data())]).toEqual([4, 1]);
      const bad = T.gather(x, T.tensor(new Int32Array([1, 7]), [2], { backend: gpu }));
      await expect(bad.data()).rejects.toThrow(/gather: index 7 .* size 4/);
      // reported once: the next read works again
      expect([...(await ok.data())]).toEqual([4, 1]);
      T.crossEntropy(T.ones([1, 3], { backend: gpu }), T.tensor(new Int32Array([-2]), [1], { backend: gpu }));
      await expect(ok.data()).rejects.toThrow(T.IndexRangeError);
    } finally {
      T.setDebugIndices(false);
    }
  });
});
