import { expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { wasmKernels } from '../../esbuild.wasm.mjs';
import * as T from '../../src/index.js';
import { acquireDevice } from '../../src/backends/webgpu/platform.js';
import { bufferOf } from '../../src/backends/webgpu/storage.js';
import { copyProgram } from '../../src/backends/webgpu/kernels/movement.js';
import { describeGpu } from './helpers.js';

/**
 * The runtime's guarantees: errors never pass silently (a failed pipeline, an invalid bind group, an uncaptured
 * error and a lost device each become a typed error naming the kernel, thrown by the next read and every later
 * call); the buffer pool never hands out a buffer still used by unsubmitted commands; dispose destroys the
 * device so the process exits. Tests that poison a backend use their own.
 */
// Validation on whatever RLVR_WEBGPU_FAST says: these tests make invalid calls on purpose, which Dawn's
// skip_validation would let through (undefined behaviour; it aborted the process once).
const fresh = (opts: T.WebGpuBackendOptions = {}): Promise<T.WebGpuBackend> =>
  T.createWebGpuBackend({ fast: false, ...opts });

describeGpu('webgpu runtime: errors are typed and loud', (gpu) => {
  it('a shader that fails validation: the next read throws GpuValidationError naming the kernel, and so does every later call', async () => {
    const b = await fresh();
    const x = T.tensor([1, 2, 3], [3], { backend: b });
    const out = b.runtime.alloc(16);
    b.runtime.dispatch({
      kernel: 'broken_kernel',
      key: 'broken_kernel',
      bindings: ['read', 'write'],
      source: () => '@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }',
      buffers: [bufferOf(x.storageFor('test')), out],
      workgroups: [1, 1, 1],
    });
    const y = T.neg(x);
    const err = await y.data().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(T.GpuValidationError);
    expect((err as T.GpuValidationError).kernel).toBe('broken_kernel');
    expect(String((err as Error).message)).toMatch(/broken_kernel/);
    expect(() => T.neg(x)).toThrow(T.GpuValidationError);
    b.dispose();
  });

  it('an invalid bind group (a uniform smaller than the kernel declares) is caught by the batch scope and names the kernel', async () => {
    const b = await fresh();
    const x = T.tensor([1, 2, 3, 4], [4], { backend: b });
    b.runtime.dispatch({
      kernel: 'copy_with_bad_uniform',
      key: 'copy:r1',
      bindings: copyProgram(1).bindings, // read, write, uniform
      source: () => copyProgram(1).source, // a valid shader with a 112-byte uniform
      buffers: [bufferOf(x.storageFor('test')), b.runtime.alloc(16)],
      uniforms: new Uint32Array(4),
      workgroups: [1, 1, 1],
    });
    const err = await b.sync().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(T.GpuValidationError);
    expect((err as T.GpuValidationError).kernel).toMatch(/copy_with_bad_uniform/);
    expect((err as Error).message).toMatch(/too small/);
    b.dispose();
  });

  it('an error outside every scope reaches the uncapturederror listener and the next call throws', async () => {
    const b = await fresh();
    await b.sync();
    b.runtime.device.createBuffer({ size: 16, usage: 0, label: 'rlvr:deliberately_invalid' });
    await new Promise((r) => setTimeout(r, 50));
    const err = await b.sync().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(T.GpuValidationError);
    expect((err as T.GpuValidationError).kernel).toBe('deliberately_invalid');
    b.dispose();
  });

  it('a lost device becomes a DeviceLostError on the next call', async () => {
    const b = await fresh();
    const x = T.tensor([1, 2], [2], { backend: b });
    b.runtime.device.destroy(); // not through dispose(): as if the driver had reset
    await b.runtime.device.lost;
    expect(() => T.neg(x)).toThrow(T.DeviceLostError);
  });

  it('readSync and freed storage throw typed errors', async () => {
    const x = T.tensor([1, 2], [2], { backend: gpu });
    expect(() => x.dataSync()).toThrow(T.BackendError);
    expect(() => gpu.readSync()).toThrow(T.BackendError);
    const s = x.storageFor('test');
    x.dispose();
    await expect(gpu.read({ storage: s, shape: [2], dtype: 'f32' })).rejects.toThrow(T.BackendError);
  });

  it('no adapter: a NoAdapterError that names what to install', async () => {
    const err = await acquireDevice({ paths: [] }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(T.NoAdapterError);
    expect(String((err as Error).message)).toMatch(/libegl1 libegl-mesa0 libgles2 libgl1-mesa-dri/);
    expect(String((err as Error).message)).toMatch(/libvulkan1/);
  });

  it('the native path is tried first; on a machine without a GPU it reports why', async () => {
    const got = await acquireDevice({ paths: ['native'] }).then(
      (d) => d,
      (e: unknown) => e,
    );
    if (got instanceof T.NoAdapterError) expect(got.tried[0]).toMatch(/native/);
    else {
      const d = got as Awaited<ReturnType<typeof acquireDevice>>;
      expect(d.adapter.path).toBe('native');
      d.device.destroy();
    }
  });
});

describeGpu('webgpu runtime: batching and the buffer pool', (gpu) => {
  it('a buffer freed while commands that read it are unsubmitted is not handed out before the submit', async () => {
    const b = await fresh({ dispatchesPerSubmit: 10_000 });
    const x = T.tensor([1, 2, 3, 4], [4], { backend: b });
    const xBuffer = bufferOf(x.storageFor('test'));
    const y = T.neg(x); // encoded, not submitted
    x.dispose(); // freed while the neg that reads it is unsubmitted
    expect(b.stats().pendingBuffers).toBeGreaterThan(0);
    const z = T.tensor([9, 9, 9, 9], [4], { backend: b }); // an upload lands on the queue at once
    expect(bufferOf(z.storageFor('test'))).not.toBe(xBuffer);
    expect([...(await y.data())]).toEqual([-1, -2, -3, -4]);
    // After the submit the freed buffer is reusable.
    const w = T.tensor([5, 5, 5, 5], [4], { backend: b });
    expect(b.stats().pendingBuffers).toBe(0);
    expect(bufferOf(w.storageFor('test'))).toBe(xBuffer);
    T.dispose([y, z, w]);
    b.dispose();
  });

  it('submits every N dispatches, and reads see everything encoded before them', async () => {
    const b = await fresh({ dispatchesPerSubmit: 4 });
    let x = T.tensor([1], [1], { backend: b });
    const submits = b.stats().submits;
    const one = T.tensor([1], [1], { backend: b });
    for (let i = 0; i < 10; i++) {
      const y = T.add(x, one);
      x.dispose();
      x = y;
    }
    expect(b.stats().submits - submits).toBe(2);
    expect([...(await x.data())]).toEqual([11]);
    T.dispose([x, one]);
    b.dispose();
  });

  it('memory() counts live buffers and bytes; idle pool buffers are reported apart', async () => {
    const before = gpu.memory();
    const x = T.zeros([256], { backend: gpu });
    const after = gpu.memory();
    expect(after.buffers).toBe(before.buffers + 1);
    expect(after.bytes).toBe(before.bytes + 1024);
    x.dispose();
    await gpu.sync();
    expect(gpu.memory()).toEqual(before);
    expect(gpu.stats().idleBuffers).toBeGreaterThan(0);
  });

  it('dispose() destroys the device: a script that disposes its backend exits by itself', async () => {
    mkdirSync(join(process.cwd(), 'dist'), { recursive: true });
    const dir = mkdtempSync(join(process.cwd(), 'dist', 'exit-check-')); // dist/ is git-ignored
    try {
      writeFileSync(
        join(dir, 'main.ts'),
        `import { createWebGpuBackend, tensor, matmul } from '../../src/index.js';
const b = await createWebGpuBackend();
const x = tensor([1, 2, 3, 4], [2, 2], { backend: b });
console.log([...(await matmul(x, x).data())].join(','));
b.dispose();
if ('gpu' in (globalThis.navigator ?? {})) throw new Error('the GPU object was left on navigator');
`,
      );
      await build({
        entryPoints: [join(dir, 'main.ts')],
        bundle: true,
        platform: 'node',
        format: 'esm',
        packages: 'external',
        loader: { '.wgsl': 'text' },
        plugins: [wasmKernels],
        outfile: join(dir, 'main.mjs'),
        logLevel: 'silent',
      });
      const out = execFileSync(process.execPath, [join(dir, 'main.mjs')], {
        timeout: 60_000,
        stdio: ['ignore', 'pipe', 'ignore'],
      }).toString();
      expect(out.trim()).toBe('7,10,15,22');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
