import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.js';
import { dawnNoiseFilter } from '../../src/cli/quiet-gpu.js';
import { cliBundle, rlvrChild, rlvrSync, TINY_ARGS, withArgs } from './helpers/cli.js';

/**
 * Every WebGPU run printed Dawn's warnings (written by native code straight to stderr): "Couldn't
 * load Vulkan: libvulkan.so.1 ..." and two "artificially reduced" limits. They stay out of a user's output unless
 * RLVR_DEBUG=1 asks for them; the README says what they mean.
 */
const DAWN = [
  "Warning: Couldn't load Vulkan: libvulkan.so.1: cannot open shared object file: No such file or directory",
  '    at operator() (/home/runner/work/node-webgpu/node-webgpu/third_party/dawn/src/dawn/native/vulkan/BackendVk.cpp:368)',
  '',
  'Warning: maxDynamicUniformBuffersPerPipelineLayout artificially reduced from 90 to 16 to fit dynamic offset allocation limit.',
  'Warning: maxDynamicStorageBuffersPerPipelineLayout artificially reduced from 80 to 16 to fit dynamic offset allocation limit.',
];
const cli = cliBundle('gpu-quiet');
beforeAll(cli.build);
afterAll(cli.remove);
const WEBGPU = [...withArgs(TINY_ARGS, { '--warm-start-steps': '1', '--steps': '1' }), '--backend', 'webgpu'];

describe("Dawn's warnings stay out of the output unless asked", () => {
  it("the filter drops Dawn's warning blocks and keeps every line of ours", () => {
    const f = dawnNoiseFilter();
    const ours = ['rlvr: training diverged: loss = NaN at rl step 3', `rlvr: ${'x'.repeat(50)}`];
    const kept = [...f.push(`${[...DAWN, ours[0], ''].join('\n')}`), ...f.push(`${ours[1]}\n`), ...f.end()];
    expect(kept).toEqual(ours);
    // split across chunks, mid-line
    const g = dawnNoiseFilter();
    const text = `${DAWN.join('\n')}\n${ours[0]}\n`;
    const out = [...g.push(text.slice(0, 37)), ...g.push(text.slice(37, 190)), ...g.push(text.slice(190)), ...g.end()];
    expect(out).toEqual([ours[0]]);
  });

  it('a WebGPU run prints nothing on stderr (it printed 5 lines of Dawn); RLVR_DEBUG=1 shows them', () => {
    const r = rlvrSync(cli.path, ['train', ...WEBGPU]);
    if (r.status === EXIT.usage && /adapter/i.test(r.stderr)) return; // no WebGPU adapter here: nothing to show
    expect(r.status, r.stderr).toBe(EXIT.ok);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^rlvr: backend webgpu/m);
    const debug = rlvrSync(cli.path, ['train', ...WEBGPU], { RLVR_DEBUG: '1' });
    expect(debug.status).toBe(EXIT.ok);
    // Dawn says something on a machine like this one (no Vulkan, or reduced limits); it is shown when asked.
    if (/Warning: /.test(debug.stderr)) expect(debug.stderr).toMatch(/^Warning: /m);
  }, 120_000);

  it('through the filter, SIGTERM still stops at a step with one line and exit 5, and exit statuses pass', async () => {
    const bad = rlvrSync(cli.path, ['train', ...withArgs(WEBGPU, { '--steps': '-3' })]);
    expect(bad.status).toBe(EXIT.usage);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    const out = join(mkdtempSync(join(tmpdir(), 'rlvr-gpuq-')), 'run');
    const run = rlvrChild(cli.path, [
      'train',
      ...withArgs(WEBGPU, { '--warm-start-steps': '100000' }),
      '--output',
      out,
    ]);
    try {
      await run.waitFor(/^warmstart 10\//m);
    } catch {
      return; // no adapter
    }
    run.child.kill('SIGTERM');
    const r = await run.done;
    expect(r.code).toBe(EXIT.interrupted);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^rlvr: interrupted by SIGTERM/);
  }, 120_000);
});
