import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { describeGpu } from './helpers.js';

/**
 * scatterAdd over more indices than one invocation may scan on llvmpipe: Mesa ends a loop after about 65,535
 * iterations without an error, and the row lists' single pass scanned every later index for the next one with its
 * row (70,000 indices: a row's sum came out 46 instead of 3). Over LINKS_WINDOW indices the lists are built a window
 * at a time and walked LINKS_WINDOW links a dispatch (one row holding nearly every index: the single walk lost its
 * last update). Integer updates, so every sum is exact in f32 and must equal the reference backend's.
 */
describeGpu('webgpu scatterAdd over 70,000 indices', (gpu) => {
  it('equals the reference backend, with a row whose only two indices are 69,999 apart', async () => {
    const n = 70_000;
    const rows = 61;
    const idx = new Int32Array(n);
    let s = 7;
    for (let j = 1; j < n - 1; j++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      idx[j] = 1 + (s % (rows - 1)); // rows 1 .. rows - 1; row 0 is the two ends'
    }
    idx[0] = 0;
    idx[n - 1] = 0;
    const upd = Float32Array.from({ length: 2 * n }, (_, k) => (k % 7) - 3);
    const sumOn = async (backend: T.Backend): Promise<Float32Array> => {
      const u = T.tensor(upd, [n, 2], { backend });
      const i = T.tensor(idx, [n], { backend, dtype: 'i32' });
      const out = T.scatterAdd(u, i, 0, [rows, 2]);
      const got = (await out.data()) as Float32Array;
      T.dispose([u, i, out]);
      return got;
    };
    const want = await sumOn(new T.ReferenceBackend() as T.Backend);
    const got = await sumOn(gpu);
    expect([want[0], want[1]]).toEqual([upd[0]! + upd[2 * (n - 1)]!, upd[1]! + upd[2 * (n - 1) + 1]!]);
    expect(Array.from(got)).toEqual(Array.from(want));
  });

  it('equals the reference backend where one row holds 69,990 of the 70,000 indices (its list is walked in parts)', async () => {
    const n = 70_000;
    const idx = Int32Array.from({ length: n }, (_, j) => (j % 7000 === 1 ? 1 + (j % 3) : 0));
    const upd = Float32Array.from({ length: n }, (_, j) => (j % 5) - 2 + (j === n - 1 ? 100 : 0));
    const sumOn = async (backend: T.Backend): Promise<Float32Array> => {
      const u = T.tensor(upd, [n], { backend });
      const i = T.tensor(idx, [n], { backend, dtype: 'i32' });
      const out = T.scatterAdd(u, i, 0, [4]);
      const got = (await out.data()) as Float32Array;
      T.dispose([u, i, out]);
      return got;
    };
    // Integer sums, exact: the rows' totals summed here directly, then both backends against them.
    const direct = [0, 0, 0, 0];
    for (let j = 0; j < n; j++) direct[idx[j]!]! += upd[j]!;
    expect(Array.from(await sumOn(new T.ReferenceBackend() as T.Backend))).toEqual(direct);
    expect(Array.from(await sumOn(gpu))).toEqual(direct);
  });
});
