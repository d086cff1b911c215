import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BackendError } from '../../src/core/errors.js';
import { defineProgram, packUniforms } from '../../src/backends/webgpu/program.js';
import { ROOT } from '../helpers/import-graph.js';

/**
 * Each WGSL kernel's contract is written once, in its program record (src/backends/webgpu/program.ts): the
 * shaders declare no binding, no uniform struct and no numeric workgroup size, which the record generates.
 */
const SHADERS = join(ROOT, 'shaders');

describe('WGSL kernels described once', () => {
  const shaders = readdirSync(SHADERS).filter((f) => f.endsWith('.wgsl'));

  it('finds the shaders', () => expect(shaders.length).toBeGreaterThan(20));

  it.each(shaders)('%s declares no binding, uniform struct or numeric workgroup size', (file) => {
    const text = readFileSync(join(SHADERS, file), 'utf8').replace(/\/\/.*$/gm, '');
    expect(text).not.toMatch(/@binding\s*\(/);
    expect(text).not.toMatch(/\bstruct\s+Params\b/);
    expect(text).not.toMatch(/@workgroup_size\s*\(\s*[\d{]/);
  });

  it('a body that declares what the record generates is refused, naming it', () => {
    const record = { name: 'k', inputs: { x: 'f32' }, outputs: { y: 'f32' }, workgroupSize: 64 } as const;
    const bodies = {
      '@group(0) @binding(0) var<storage, read> z: array<f32>;': 'a binding',
      'struct Params { n: u32 };': 'the Params struct',
      '@compute @workgroup_size(64) fn main() {}': 'a workgroup size',
    };
    for (const [body, what] of Object.entries(bodies))
      expect(() => defineProgram({ ...record, body })).toThrow(new RegExp(`k: its body declares ${what}`));
    expect(() => defineProgram({ ...record, body: 'fn f() {}' })).not.toThrow(BackendError);
  });

  it('generates the header from the record: bindings in order, Params, workgroup constants, grid helpers', () => {
    const p = defineProgram({
      name: 'k',
      inputs: { a: 'f32', idx: 'i32' },
      outputs: { out: 'u32' },
      uniforms: { n: 'u32', grid_x: 'u32', scale: 'f32' },
      workgroupSize: [8, 4, 1],
      body: '@compute @workgroup_size(WG_X, WG_Y, WG_Z)\nfn main() {}',
    });
    expect(p.bindings).toEqual(['read', 'read', 'write', 'uniform']);
    expect(p.invocations).toBe(32);
    for (const line of [
      'const WG_X: u32 = 8u;',
      'const WG_Y: u32 = 4u;',
      'const WG: u32 = 32u;',
      '@group(0) @binding(0) var<storage, read> a: array<f32>;',
      '@group(0) @binding(1) var<storage, read> idx: array<i32>;',
      '@group(0) @binding(2) var<storage, read_write> out: array<u32>;',
      '@group(0) @binding(3) var<uniform> params: Params;',
      'fn thread_index(gid: vec3<u32>) -> u32 {',
    ])
      expect(p.source).toContain(line);
    expect(p.source).toMatch(/struct Params \{\n {2}n: u32,\n {2}grid_x: u32,\n {2}scale: f32,\n\};/);
  });

  it('packs uniforms by name at WGSL offsets (vectors and arrays 16-byte aligned), grid_x from the dispatch', () => {
    const p = defineProgram({
      name: 'k',
      inputs: {},
      outputs: { out: 'u32' },
      uniforms: { n: 'u32', grid_x: 'u32', v: 'vec4<u32>', f: 'f32', i: 'i32', arr: 'array<vec4<u32>, 2>' },
      workgroupSize: 1,
      body: '',
    });
    expect(p.fields.map((f) => [f.name, f.word])).toEqual([
      ['n', 0],
      ['grid_x', 1],
      ['v', 4],
      ['f', 8],
      ['i', 9],
      ['arr', 12],
    ]);
    const words = packUniforms(p, { n: 7, v: [1, 2, 3], f: 0.5, i: -1, arr: [9, 8, 7, 6, 5] }, 3);
    expect(words.length).toBe(20);
    expect([...words.subarray(0, 12)]).toEqual([7, 3, 0, 0, 1, 2, 3, 0, 0x3f000000, 0xffffffff, 0, 0]);
    expect([...words.subarray(12)]).toEqual([9, 8, 7, 6, 5, 0, 0, 0]);
    expect(() => packUniforms(p, { n: 7 }, 1)).toThrow(/no value for uniform v/);
  });
});
