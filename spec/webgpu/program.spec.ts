import { expect, it } from 'vitest';
import * as T from '../../src/index.js';
import { launch } from '../../src/backends/webgpu/launch.js';
import { defineProgram, packUniforms } from '../../src/backends/webgpu/program.js';
import { describeGpu } from './helpers.js';

/**
 * A program record on the device: the uniform block packed by field name lands where WGSL's struct layout puts
 * each field (the shader reads them back), the grid comes from the workgroup size, and the record's dtype rule
 * refuses a tensor of the wrong dtype before anything is dispatched.
 */
describeGpu('webgpu program records', (gpu) => {
  it("packs the uniform block at WGSL's offsets and fills grid_x with the dispatch's workgroups along x", async () => {
    const echo = defineProgram({
      name: 'uniformEcho',
      inputs: {},
      outputs: { out: 'u32' },
      uniforms: { n: 'u32', grid_x: 'u32', v: 'vec4<u32>', f: 'f32', i: 'i32', arr: 'array<vec4<u32>, 2>' },
      workgroupSize: 64,
      body: `@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (thread_index(gid) != 0u) {
    return;
  }
  out[0] = params.n;
  out[1] = params.grid_x;
  out[2] = params.v.x;
  out[3] = params.v.w;
  out[4] = bitcast<u32>(params.f);
  out[5] = bitcast<u32>(params.i);
  out[6] = params.arr[0].x;
  out[7] = params.arr[1].y;
}`,
    });
    const values = { n: 7, v: [1, 2, 3, 4], f: 0.5, i: -3, arr: [9, 8, 7, 6, 5, 4] };
    const threads = 64 * 3 + 1; // four workgroups along x
    const [out] = launch(gpu.runtime, echo, { inputs: [], outputs: [32], grid: { threads }, uniforms: values });
    const words = new Uint32Array(await gpu.runtime.read(out, 32));
    gpu.runtime.release(out);
    const packed = packUniforms(echo, values, 4);
    expect([...words]).toEqual([7, 4, 1, 4, packed[8], packed[9], 9, 4]);
    expect(new Float32Array(words.buffer)[4]).toBe(0.5);
    expect(new Int32Array(words.buffer)[5]).toBe(-3);
  });

  it('launches of one kernel on one buffer whose uniforms differ each read their own block', async () => {
    const put = defineProgram({
      name: 'uniformPut',
      inputs: {},
      outputs: { out: 'u32' },
      uniforms: { grid_x: 'u32', at: 'u32', value: 'u32' },
      workgroupSize: 1,
      body: `@compute @workgroup_size(WG_X, WG_Y, WG_Z)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  out[params.at] = params.value;
}`,
    });
    const n = 100;
    const out = gpu.runtime.alloc(4 * n);
    // The same kernel and buffer each time, a new uniform block each time (as AdamW's bias corrections are).
    for (let k = 0; k < n; k++)
      launch(gpu.runtime, put, {
        inputs: [],
        outputs: [out],
        grid: { threads: 1 },
        uniforms: { at: k, value: 7000 + k },
      });
    const words = new Uint32Array(await gpu.runtime.read(out, 4 * n));
    gpu.runtime.release(out);
    expect([...words]).toEqual(Array.from({ length: n }, (_, k) => 7000 + k));
  });

  it("refuses an input of the wrong dtype by the record's rule, naming the kernel and the binding", () => {
    const i = T.tensor([1, 2, 3], [3], { dtype: 'i32', backend: gpu });
    const before = gpu.stats().dispatches;
    expect(() => T.swiglu(i, i)).toThrow(T.DTypeError);
    expect(() => T.swiglu(i, i)).toThrow(/swiglu: the WebGPU kernel needs f32 for gate, got i32/);
    expect(gpu.stats().dispatches).toBe(before);
    i.dispose();
  });
});
